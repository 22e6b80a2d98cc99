package shardserver

import (
	"context"
	"fmt"
	"io"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// runPull is conventional repair on this server: read k whole shards
// (its own from disk), decode the targets' shards slice by slice and store
// them. PULL-Rep runs it on the destination, PULL-Sur on a survivor.
func (s *Server) runPull(ctx context.Context, req shardrpc.PullRequest) (shardrpc.RepairReport, error) {
	g, err := s.openGroup(req.RepairGroup)
	if err != nil {
		return shardrpc.RepairReport{}, err
	}
	if err := checkSRU(req.SRU); err != nil {
		return shardrpc.RepairReport{}, err
	}
	k, n := g.code.DataShards(), g.code.TotalShards()
	lost := make([]int, 0, len(req.Targets))
	for _, t := range req.Targets {
		lost = append(lost, t.Idx)
	}
	if len(req.Sources) != k {
		return shardrpc.RepairReport{}, fmt.Errorf("%w: pull needs %d sources, got %d", shardrpc.ErrBadRequest, k, len(req.Sources))
	}
	for _, src := range req.Sources {
		if src.Idx < 0 || src.Idx >= n || slices.Contains(lost, src.Idx) {
			return shardrpc.RepairReport{}, fmt.Errorf("%w: bad source %+v", shardrpc.ErrBadRequest, src)
		}
	}
	for _, t := range req.Targets {
		if t.Idx < 0 || t.Idx >= n {
			return shardrpc.RepairReport{}, fmt.Errorf("%w: bad target %+v", shardrpc.ErrBadRequest, t)
		}
	}
	if err := targetsValid(g, lost, req.Targets); err != nil {
		return shardrpc.RepairReport{}, err
	}
	method := req.Method

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rep := &report{}
	units := g.units(req.SRU)
	size := maxUnit(units)

	// Sources: a verified stream from each peer, this server's own shard
	// from disk.
	type source struct {
		peer   shardrpc.RepairPeer
		local  *localShard
		stream io.ReadCloser
		got    int64
	}
	srcs := make([]*source, len(req.Sources))
	defer func() {
		for _, src := range srcs {
			if src == nil {
				continue
			}
			if src.local != nil {
				src.local.Close()
			}
			if src.stream != nil {
				src.stream.Close()
			}
		}
	}()
	for i, p := range req.Sources {
		src := &source{peer: p}
		srcs[i] = src
		if p.ID == s.cfg.NodeID {
			if src.local, err = s.openLocal(g.FileID, p.Idx, g.size); err != nil {
				return shardrpc.RepairReport{}, err
			}
			continue
		}
		if src.stream, err = s.rep.peers.GetShard(ctx, p.Addr, g.FileID, p.Idx, 0, g.size); err != nil {
			return shardrpc.RepairReport{}, blame(p.ID, err)
		}
	}

	// Buffers: depth slots of one slice per source, and one output per
	// target (reused: the store has taken it when Write returns).
	bufs := make([][][]byte, repairDepth)
	for d := range bufs {
		bufs[d] = make([][]byte, len(srcs))
		for i := range srcs {
			bufs[d][i] = make([]byte, size)
		}
	}
	required := make([]bool, n)
	for _, idx := range lost {
		required[idx] = true
	}
	shards := make([][]byte, n)

	sinks, closeSinks := s.openSinks(ctx, g, req.Targets, method, rep)
	fill := func(ctx context.Context, i, slot int) error {
		u := units[i]
		eg, _ := errgroup.WithContext(ctx)
		for j, src := range srcs {
			b := bufs[slot][j][:u.n]
			eg.Go(func() error {
				if src.local != nil {
					return src.local.readAt(b, u.off)
				}
				m, err := io.ReadFull(src.stream, b)
				src.got += int64(m)
				return blame(src.peer.ID, err)
			})
		}
		return eg.Wait()
	}
	drain := func(ctx context.Context, i, slot int) error {
		u := units[i]
		clear(shards)
		for j, src := range srcs {
			shards[src.peer.Idx] = bufs[slot][j][:u.n]
		}
		// NB: lost entries stay nil: the codec allocates them (it does not
		// take caller buffers for missing shards).
		if err := g.code.ReconstructSome(shards, required); err != nil {
			return fmt.Errorf("decode slice at %d: %w", u.off, err)
		}
		for _, idx := range lost {
			if len(shards[idx]) != int(u.n) {
				return fmt.Errorf("decode slice at %d: shard %d has %d bytes, want %d", u.off, idx, len(shards[idx]), u.n)
			}
			if _, err := sinks[idx].Write(shards[idx]); err != nil {
				return err
			}
		}
		return nil
	}
	err = pipeline(ctx, len(units), repairDepth, fill, drain)
	for _, src := range srcs {
		if src.stream != nil {
			rep.transfer(src.peer.ID, s.cfg.NodeID, src.got)
			s.rep.received.WithLabelValues(method).Add(float64(src.got))
			s.dataPath.Add(int64(src.got))
		}
	}
	if err != nil {
		cancel(err)
	}
	if err := closeSinks(err); err != nil {
		return shardrpc.RepairReport{}, err
	}
	return rep.rep, nil
}
