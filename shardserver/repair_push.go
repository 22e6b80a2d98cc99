package shardserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// repairPush is one hop of a PUSH chain. For every slice position it
// reads its local slice, receives one partial slice per lost shard from
// the previous hop (the first hop starts from zero), adds coefficient x
// local into each (codec.PushStep) and forwards them to the next hop; the
// last hop stores the finished slices on the targets. Receiving, reading,
// computing and sending overlap through a few preallocated slice buffers.
func (s *Server) repairPush(w http.ResponseWriter, r *http.Request) {
	var req shardrpc.PushRequest
	if err := shardrpc.DecodeSpec(r.Header.Get(shardrpc.HeaderRepairSpec), &req); err != nil {
		s.fail(w, r, err)
		return
	}
	rep, err := s.runPush(r.Context(), req, r.Body)
	if err != nil {
		s.repairFail(w, r, "push", err)
		return
	}
	shardrpc.WriteJSON(w, http.StatusOK, rep)
}

func (s *Server) runPush(ctx context.Context, req shardrpc.PushRequest, body io.Reader) (shardrpc.RepairReport, error) {
	g, err := s.openGroup(req.RepairGroup)
	if err != nil {
		return shardrpc.RepairReport{}, err
	}
	if err := checkSRU(req.SRU); err != nil {
		return shardrpc.RepairReport{}, err
	}
	if err := targetsValid(g, req.Lost, req.Targets); err != nil {
		return shardrpc.RepairReport{}, err
	}
	k := g.code.DataShards()
	if len(req.Chain) != k || req.Pos < 0 || req.Pos >= k || req.Chain[req.Pos].ID != s.cfg.NodeID {
		return shardrpc.RepairReport{}, fmt.Errorf("%w: hop %d of a chain of %d (want %d hops ending here)", shardrpc.ErrBadRequest, req.Pos, len(req.Chain), k)
	}
	lin, ok := g.code.(codec.Linear)
	if !ok {
		return shardrpc.RepairReport{}, fmt.Errorf("%w: code %s has no PUSH coefficients", shardrpc.ErrBadRequest, g.Code)
	}
	chainIdx := make([]int, k)
	for i, p := range req.Chain {
		chainIdx[i] = p.Idx
	}
	me := req.Chain[req.Pos]
	t := len(req.Lost)
	coef := make([][][]byte, t)
	for j, lost := range req.Lost {
		co, err := lin.Coefficients(lost, chainIdx)
		if err != nil {
			return shardrpc.RepairReport{}, fmt.Errorf("%w: coefficients: %w", shardrpc.ErrBadRequest, err)
		}
		coef[j] = co[req.Pos]
	}
	local, err := s.openLocal(g.FileID, me.Idx, g.size)
	if err != nil {
		return shardrpc.RepairReport{}, err
	}
	defer local.Close()

	method := req.Method
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rep := &report{}
	units := g.units(req.SRU)
	size := maxUnit(units)
	last := req.Pos == k-1

	// Downstream: a streaming call to the next hop, or the targets' stores.
	var (
		next     *sink
		sinks    map[int]*sink
		closeAll func(error) error
	)
	if last {
		sinks, closeAll = s.openSinks(ctx, g, req.Targets, method, rep)
	} else {
		var pr *slicePipeReader
		next, pr = newSink()
		nreq := req
		nreq.Pos++
		peer := req.Chain[nreq.Pos]
		go func() {
			nrep, err := s.rep.peers.RepairPush(ctx, peer.Addr, nreq, pr)
			err = blame(peer.ID, err)
			if err == nil {
				rep.merge(nrep)
			}
			s.rep.sent.WithLabelValues(method).Add(float64(next.n.Load()))
			s.dataPath.Add(2 * int64(next.n.Load())) // read and sent
			next.end(pr, err)
		}()
		closeAll = func(err error) error {
			if err != nil {
				next.abort(err)
				return err
			}
			return next.finish()
		}
	}

	type slot struct {
		local   []byte
		partial [][]byte
	}
	slots := make([]slot, repairDepth)
	for d := range slots {
		slots[d].local = make([]byte, size)
		slots[d].partial = make([][]byte, t)
		for j := range t {
			slots[d].partial[j] = make([]byte, size)
		}
	}
	var got int64
	prev := ""
	if req.Pos > 0 {
		prev = req.Chain[req.Pos-1].ID
	}
	fill := func(ctx context.Context, i, d int) error {
		u := units[i]
		sl := &slots[d]
		if err := local.readAt(sl.local[:u.n], u.off); err != nil {
			return err
		}
		for j := range t {
			p := sl.partial[j][:u.n]
			if req.Pos == 0 {
				clear(p)
				continue
			}
			m, err := io.ReadFull(body, p)
			got += int64(m)
			if err != nil {
				return blame(prev, fmt.Errorf("receive partial slice at %d: %w", u.off, err))
			}
		}
		return nil
	}
	drain := func(ctx context.Context, i, d int) error {
		u := units[i]
		sl := &slots[d]
		for j := range t {
			p := sl.partial[j][:u.n]
			if err := codec.PushStep(coef[j], sl.local[:u.n], p); err != nil {
				return err
			}
			var err error
			if last {
				_, err = sinks[req.Lost[j]].Write(p)
			} else {
				_, err = next.Write(p)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	err = pipeline(ctx, len(units), repairDepth, fill, drain)
	if err == nil && req.Pos > 0 {
		// The stream must end exactly here.
		var one [1]byte
		if m, rerr := io.ReadFull(body, one[:]); m > 0 || rerr != io.EOF {
			err = blame(prev, fmt.Errorf("%w: partial stream longer than the shards", shardrpc.ErrBadRequest))
		}
	}
	if req.Pos > 0 {
		rep.transfer(prev, s.cfg.NodeID, got)
		s.rep.received.WithLabelValues(method).Add(float64(got))
		s.dataPath.Add(int64(got))
	}
	if err != nil {
		cancel(err)
	}
	if err := closeAll(err); err != nil {
		return shardrpc.RepairReport{}, err
	}
	out := rep.rep
	out.Stored = slices.Clip(out.Stored)
	return out, nil
}
