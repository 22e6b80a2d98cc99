package shardserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// plan returns the repair plan of the group's code for lost.
func (s *Server) plan(g *group, lost []int) (*codec.Plan, error) {
	p, err := s.rep.codes.RepairPlan(g.Code, lost)
	if err != nil {
		return nil, fmt.Errorf("%w: plan %s for %v: %w", shardrpc.ErrBadRequest, g.Code, lost, err)
	}
	return p, nil
}

// runCore is a CORE relayer: it asks every helper of the repair plan
// for its encoding of the failure set (req.Lost and req.Erased), rebuilds
// the lost shards stripe by stripe (codec.Plan.Rebuild) and stores those
// of req.Lost on their targets.
func (s *Server) runCore(ctx context.Context, req shardrpc.CoreRequest) (shardrpc.RepairReport, error) {
	g, err := s.openGroup(req.RepairGroup)
	if err != nil {
		return shardrpc.RepairReport{}, err
	}
	if err := targetsValid(g, req.Lost, req.Targets); err != nil {
		return shardrpc.RepairReport{}, err
	}
	failed := slices.Concat(req.Lost, req.Erased)
	slices.Sort(failed)
	if failed = slices.Compact(failed); len(failed) != len(req.Lost)+len(req.Erased) {
		return shardrpc.RepairReport{}, fmt.Errorf("%w: shards %v are both lost and erased", shardrpc.ErrBadRequest, req.Erased)
	}
	plan, err := s.plan(g, failed)
	if err != nil {
		return shardrpc.RepairReport{}, err
	}
	if !slices.Equal(plan.Failed, failed) {
		return shardrpc.RepairReport{}, fmt.Errorf("%w: plan rebuilds %v, not %v", shardrpc.ErrBadRequest, plan.Failed, failed)
	}
	byIdx := map[int]shardrpc.RepairPeer{}
	for _, h := range req.Helpers {
		byIdx[h.Idx] = h
	}
	method := req.Method
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rep := &report{}

	// One stream per helper the plan asks something of.
	type helper struct {
		peer   shardrpc.RepairPeer
		task   *codec.HelperTask
		stream io.ReadCloser
		got    int64
	}
	hs := make([]*helper, len(plan.Helpers))
	defer func() {
		for _, h := range hs {
			if h != nil && h.stream != nil {
				h.stream.Close()
			}
		}
	}()
	for i := range plan.Helpers {
		t := &plan.Helpers[i]
		p, ok := byIdx[t.Shard]
		if !ok {
			return shardrpc.RepairReport{}, fmt.Errorf("%w: the plan needs shard %d, which no helper holds", shardrpc.ErrBadRequest, t.Shard)
		}
		h := &helper{peer: p, task: t}
		hs[i] = h
		hreq := shardrpc.HelperRequest{RepairGroup: req.RepairGroup, Lost: failed, Idx: t.Shard}
		if p.ID == s.cfg.NodeID {
			// NB: the relayer holds a helper shard itself (a survivor as
			// relayer): produce locally, no network.
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(errOr(s.helperStream(ctx, g, plan, t, g.units(MaxSRU), pw), io.EOF)) }()
			h.stream = pr
			continue
		}
		if h.stream, err = s.rep.peers.RepairHelper(ctx, p.Addr, hreq); err != nil {
			return shardrpc.RepairReport{}, blame(p.ID, err)
		}
	}

	units := g.units(MaxSRU) // whole chunks: the plan works per stripe
	chunk := maxUnit(units)
	alpha := plan.SubChunks
	bufs := make([][][]byte, repairDepth)
	for d := range bufs {
		bufs[d] = make([][]byte, len(hs))
		for i, h := range hs {
			bufs[d][i] = make([]byte, h.task.OutputLen(alpha, chunk))
		}
	}
	outs := make([][]byte, len(plan.Failed))
	for f := range outs {
		outs[f] = make([]byte, chunk)
	}
	sent := make([][]byte, len(hs))
	sinks, closeSinks := s.openSinks(ctx, g, req.Targets, method, rep)

	fill := func(ctx context.Context, i, slot int) error {
		c := int(units[i].n)
		eg, _ := errgroup.WithContext(ctx)
		for j, h := range hs {
			b := bufs[slot][j][:h.task.OutputLen(alpha, c)]
			eg.Go(func() error {
				m, err := io.ReadFull(h.stream, b)
				h.got += int64(m)
				return blame(h.peer.ID, err)
			})
		}
		return eg.Wait()
	}
	drain := func(ctx context.Context, i, slot int) error {
		c := int(units[i].n)
		for j, h := range hs {
			sent[j] = bufs[slot][j][:h.task.OutputLen(alpha, c)]
		}
		for f := range outs {
			outs[f] = outs[f][:c]
		}
		if err := plan.Rebuild(c, sent, outs); err != nil {
			return fmt.Errorf("rebuild stripe %d: %w", i, err)
		}
		for f, idx := range plan.Failed {
			if sk, ok := sinks[idx]; ok { // not an erased shard
				if _, err := sk.Write(outs[f]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err = pipeline(ctx, len(units), repairDepth, fill, drain)
	for _, h := range hs {
		if h.peer.ID != s.cfg.NodeID {
			rep.transfer(h.peer.ID, s.cfg.NodeID, h.got)
			s.rep.received.WithLabelValues(method).Add(float64(h.got))
			s.dataPath.Add(int64(h.got))
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

// repairHelper streams this helper's encoding for a failure set: for every
// stripe, what codec.HelperTask.Produce makes of its chunk.
func (s *Server) repairHelper(w http.ResponseWriter, r *http.Request) {
	var req shardrpc.HelperRequest
	if err := s.decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.openGroup(req.RepairGroup)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	plan, err := s.plan(g, req.Lost)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	task := plan.Helper(req.Idx)
	if task == nil {
		s.fail(w, r, fmt.Errorf("%w: shard %d sends nothing for failures %v", shardrpc.ErrBadRequest, req.Idx, req.Lost))
		return
	}
	// A gateway's degraded read asks for a few stripes; a repair for all.
	units, method := g.units(MaxSRU), "core"
	if req.Count > 0 {
		if req.First < 0 || req.First+req.Count > g.geo.Stripes(g.PartSize) {
			s.fail(w, r, fmt.Errorf("%w: stripes %d+%d outside the group's %d", shardrpc.ErrBadRequest, req.First, req.Count, g.geo.Stripes(g.PartSize)))
			return
		}
		units, method = g.stripeUnits(MaxSRU, req.First, req.Count), "read"
	}
	// NB: open the shard before any header goes out, so a missing shard is
	// a clean 404.
	if _, err := s.shards.stat(g.FileID, req.Idx); err != nil {
		s.fail(w, r, err)
		return
	}
	total := int64(0)
	for _, u := range units {
		total += int64(task.OutputLen(plan.SubChunks, int(u.n)))
	}
	h := w.Header()
	h.Set("Trailer", shardrpc.TrailerError)
	h.Set(shardrpc.HeaderLength, strconv.FormatInt(total, 10))
	h.Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	cw := &countWriter{w: w}
	err = s.helperStream(r.Context(), g, plan, task, units, cw)
	s.rep.sent.WithLabelValues(method).Add(float64(cw.n))
	s.dataPath.Add(2 * int64(cw.n)) // read and sent
	if err != nil {
		s.log.Error("repair helper failed mid-stream", "file", g.FileID, "idx", req.Idx, "err", err)
		h.Set(shardrpc.TrailerError, "io")
	}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// helperStream writes task's output for the stripes of units (of g) to w.
// Runs of raw sub-chunks are read straight from disk (optimal access: a
// Clay helper reads only what it sends); dot products read the whole
// chunk. Reading the next stripe overlaps sending this one.
func (s *Server) helperStream(ctx context.Context, g *group, plan *codec.Plan, task *codec.HelperTask, units []unit, w io.Writer) error {
	ls, err := s.openLocal(g.FileID, task.Shard, g.size)
	if err != nil {
		return err
	}
	defer ls.Close()
	chunk := maxUnit(units)
	alpha := plan.SubChunks
	type slot struct{ in, out []byte }
	slots := make([]slot, repairDepth)
	for d := range slots {
		slots[d] = slot{out: make([]byte, 0, task.OutputLen(alpha, chunk))}
		if task.Coef != nil {
			slots[d].in = make([]byte, chunk)
		}
	}
	fill := func(ctx context.Context, i, d int) error {
		u := units[i]
		sl := &slots[d]
		if task.Coef != nil {
			in := sl.in[:u.n]
			if err := ls.readAt(in, u.off); err != nil {
				return err
			}
			out, err := task.Produce(alpha, in, sl.out[:0])
			sl.out = out
			return err
		}
		sc := u.n / int64(alpha)
		out := sl.out[:0]
		for _, run := range task.Runs {
			start := len(out)
			out = out[:start+int(int64(run.Count)*sc)]
			if err := ls.readAt(out[start:], u.off+int64(run.Start)*sc); err != nil {
				return err
			}
		}
		sl.out = out
		return nil
	}
	drain := func(ctx context.Context, i, d int) error {
		_, err := w.Write(slots[d].out)
		return err
	}
	return pipeline(ctx, len(units), repairDepth, fill, drain)
}
