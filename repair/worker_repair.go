package repair

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/metadata"
)

// ErrSuperseded is returned (wrapped) when the object changed while its
// repair ran: a client overwrote or deleted it, or another repairer
// switched it first. The rebuilt shards are then garbage, which the shard
// servers collect.
var ErrSuperseded = errors.New("repair: object changed during repair")

// planFunc plans the repair (or move) of one part.
type planFunc func(v nodeView, m *metadata.Manifest, p metadata.Part, lost []int, pinned map[int]string) (Decision, error)

// plan runs the planner for one part with the worker's view.
func (w *Worker) plan(v nodeView, m *metadata.Manifest, p metadata.Part, lost []int, pinned map[int]string) (Decision, error) {
	in, err := w.planInput(v, m, p, lost, pinned)
	if err != nil {
		return Decision{}, err
	}
	return Plan(in)
}

// planMove plans moving the shards lost (on draining servers) of one part.
func (w *Worker) planMove(v nodeView, m *metadata.Manifest, p metadata.Part, lost []int, pinned map[int]string) (Decision, error) {
	in, err := w.planInput(v, m, p, lost, pinned)
	if err != nil {
		return Decision{}, err
	}
	return PlanMove(in)
}

func (w *Worker) planInput(v nodeView, m *metadata.Manifest, p metadata.Part, lost []int, pinned map[int]string) (PlanInput, error) {
	code, err := w.codes.Get(m.Code)
	if err != nil {
		return PlanInput{}, err
	}
	return PlanInput{
		Group: Group{Key: m.Bucket + "/" + m.Key, FileID: p.ID, Code: code, ChunkSize: m.ChunkSize,
			PartSize: p.Size, ShardCRC: p.ShardCRC, Placement: m.Placement},
		Lost: lost, Nodes: v.nodes, Model: w.cal.model(), Force: w.cfg.Method, Allowed: w.allowed, Dest: pinned,
	}, nil
}

// planner is how j's parts are planned: a drain's moves are copies when
// the executor can copy; otherwise, and for lost shards, reconstructions.
func (w *Worker) planner(j *job) planFunc {
	if j.move && (w.allowed == nil || slices.Contains(w.allowed, Copy)) {
		return w.planMove
	}
	return w.plan
}

// repair rebuilds the lost shards of every part of j's object and switches
// its manifest. The membership is read afresh, so a retry after a second
// failure re-plans with it.
func (w *Worker) repair(ctx context.Context, j *job) (Result, error) {
	v := w.view()
	m, lost, err := w.prepare(ctx, v, j)
	if err != nil {
		return Result{}, err
	}
	if len(m.Parts) == 0 {
		res, err := w.planInline(v, m, lost, j)
		if err != nil {
			return Result{}, err
		}
		w.log.Info("repair plan", "object", j.ref(), "method", Inline, "lost", lost, "dest", destIDs(res.Rebuilt))
		return res, w.switchFor(ctx, j, v, m, res.Rebuilt)
	}
	return w.repairParts(ctx, v, m, lost, j)
}

// prepare reads j's manifest and works out the shards to rebuild (or
// move) with the membership of v: an error wrapping errRetryLater when
// the object changed or j's work is no longer this server's to do.
func (w *Worker) prepare(ctx context.Context, v nodeView, j *job) (*metadata.Manifest, []int, error) {
	m, err := w.manifestOf(ctx, j)
	if errors.Is(err, metadata.ErrNotFound) {
		return nil, nil, fmt.Errorf("%w: %s gone", errNotDegraded, j.ref())
	}
	if err != nil {
		return nil, nil, err
	}
	if m.Version != j.version || m.Deleted {
		return nil, nil, fmt.Errorf("%w: %s changed", errRetryLater, j.ref())
	}
	lost := j.lost
	if !j.inPlace {
		if coordinator(v, m.Placement) != v.self {
			return nil, nil, fmt.Errorf("%w: no longer coordinator of %s", errRetryLater, j.ref())
		}
		lost = nil
		down := false
		for i, id := range m.Placement {
			d, l := w.status(v, id)
			down = down || d
			if l {
				lost = append(lost, i)
			}
		}
		if j.move {
			// Lost shards first: the next scan queues their repair, and
			// a move never waits on a repair's destinations.
			if len(lost) > 0 {
				return nil, nil, fmt.Errorf("%w: %s lost shards; repair before moving", errRetryLater, j.ref())
			}
			lost = draining(v, m.Placement)
			if len(lost) == 0 {
				return nil, nil, fmt.Errorf("%w: %s has no shards on draining servers any more", errNotDegraded, j.ref())
			}
		} else if len(lost) == 0 && !down {
			return nil, nil, fmt.Errorf("%w: %s no longer has shards on servers down", errNotDegraded, j.ref())
		} else if len(lost) == 0 {
			// NB: still degraded (counted so), its servers down within
			// their grace: not taken off the counts.
			return nil, nil, fmt.Errorf("%w: %s no longer has lost shards", errRetryLater, j.ref())
		}
	}
	return m, lost, nil
}

// repairParts rebuilds the lost shards of every part of m, j's
// erasure-coded object, and switches its manifest.
func (w *Worker) repairParts(ctx context.Context, v nodeView, m *metadata.Manifest, lost []int, j *job) (Result, error) {
	pinned := map[int]string{}
	if j.inPlace {
		for _, i := range lost {
			pinned[i] = m.Placement[i]
		}
	}
	total := Result{Rebuilt: map[int]Node{}}
	plan := w.planner(j)
	for pi, p := range m.Parts {
		d, err := plan(v, m, p, lost, pinned)
		if errors.Is(err, ErrNoCapacity) {
			already := w.sched.setWaiting(j.ref())
			w.m.decision("waiting")
			if !already { // every scan retries it: say so once
				w.log.Warn("repair waiting for capacity", "object", j.ref(), "lost", lost)
			}
			return Result{}, fmt.Errorf("%w: %w", errRetryLater, err)
		}
		if err != nil {
			return total, err
		}
		if pi == 0 {
			// Every part shares the placement: the other parts rebuild
			// exactly the shards the first one could place, onto the
			// same servers (pinned), and plan with the others still
			// lost, as waiting.
			for i, n := range d.Task.Dest {
				pinned[i] = n.ID
			}
		}
		w.m.decision(string(d.Task.Method))
		w.log.Info("repair plan", "object", j.ref(), "part", p.Number, "file", p.ID, "method", d.Task.Method,
			"lost", d.Task.Lost, "helpers", d.Task.Helpers, "dest", destIDs(d.Task.Dest), "waiting", d.Waiting,
			"predicted_s", fmt.Sprintf("%.3f", d.Predicted), "bytes", int64(d.Bytes), "costs", d.Costs)
		if err := w.charge(ctx, int64(d.Bytes)); err != nil {
			return total, err
		}
		res, err := w.runTask(ctx, d.Task)
		if err != nil && d.Task.Method == Copy && ctx.Err() == nil {
			res, err = w.moveByRebuild(ctx, v, m, p, d.Task, err)
		}
		if err != nil {
			return total, err
		}
		total.Method = res.Method
		total.BytesMoved += res.BytesMoved
		total.MaxNodeIn = max(total.MaxNodeIn, res.MaxNodeIn)
		total.Seconds += res.Seconds
		for _, i := range d.Task.Lost {
			n, ok := res.Rebuilt[i]
			if !ok {
				return total, fmt.Errorf("repair %s: executor did not rebuild shard %d", p.ID, i)
			}
			total.Rebuilt[i] = n
		}
	}
	if j.inPlace {
		return total, nil
	}
	return total, w.switchFor(ctx, j, v, m, total.Rebuilt)
}

// moveByRebuild is a failed copy's fallback: the draining server did not
// serve its shard (it may be failing, which is why it is drained), so the
// same destinations rebuild the shards from k others, like lost ones.
// The draining server's copy stays until the switch: redundancy holds.
func (w *Worker) moveByRebuild(ctx context.Context, v nodeView, m *metadata.Manifest, p metadata.Part, t Task, cause error) (Result, error) {
	w.log.Warn("drain: copy failed, rebuilding the shards instead", "file", t.FileID, "lost", t.Lost, "err", cause)
	d, err := w.plan(v, m, p, t.Lost, destIDs(t.Dest))
	if err == nil && !slices.Equal(d.Task.Lost, t.Lost) {
		err = fmt.Errorf("only shards %v have a destination", d.Task.Lost)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%w; rebuilding instead: %w", cause, err)
	}
	w.m.decision(string(d.Task.Method))
	if err := w.charge(ctx, int64(d.Bytes)); err != nil {
		return Result{}, err
	}
	return w.runTask(ctx, d.Task)
}

// charge waits for the rate limiter to admit n bytes of repair traffic.
func (w *Worker) charge(ctx context.Context, n int64) error {
	for n > 0 {
		step := min(n, int64(w.limit.Burst()))
		if err := w.limit.WaitN(ctx, int(step)); err != nil {
			return err
		}
		n -= step
	}
	return nil
}

// runTask runs t with the executor, counting the load it puts on nodes.
func (w *Worker) runTask(ctx context.Context, t Task) (Result, error) {
	involved := slices.Clone(t.Helpers)
	involved = append(involved, t.Lost...)
	ids := make([]string, 0, len(involved))
	for _, i := range t.Helpers {
		ids = append(ids, t.Placement[i].ID)
	}
	for _, n := range t.Dest {
		ids = append(ids, n.ID)
	}
	others := map[string]int{} // other tasks on each node as this one starts
	w.mu.Lock()
	for _, id := range ids {
		others[id] = w.load[id]
		w.load[id]++
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		for _, id := range ids {
			if w.load[id]--; w.load[id] <= 0 {
				delete(w.load, id)
			}
		}
		w.mu.Unlock()
	}()
	start := w.now()
	res, err := w.exec.Run(ctx, t)
	if res.Seconds == 0 {
		res.Seconds = w.now().Sub(start).Seconds()
	}
	if res.Method == "" {
		res.Method = t.Method
	}
	if err == nil {
		w.learn(res, others)
	}
	return res, err
}

// Bounds on learning a node's network rate from one repair.
const (
	learnMinBytes = 1 << 20 // smaller transfers measure latency, not rate
	learnWeight   = 0.2     // moving average: a new sample's weight
	learnStep     = 2.0     // one sample moves the rate by at most this factor
	learnFloor    = 1e6     // bytes/s: never believe a node slower than this
)

// learn updates the network rate of the nodes that received data in a
// finished repair: bytes received over the transfer time (fixed costs
// taken out), times the tasks it shared the node with, since the planner
// divides a node's rate by its load again. A bounded moving average, so
// one slow or fast task cannot run the estimate away.
func (w *Worker) learn(res Result, others map[string]int) {
	secs := res.Seconds - w.cal.model().Setup.Seconds() - w.cal.model().Fsync.Seconds()
	if secs <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, in := range res.NodeIn {
		if in < learnMinBytes {
			continue
		}
		obs := float64(in) / secs * float64(1+others[id])
		r := w.rates[id]
		cur := r.Net
		if cur <= 0 {
			cur = w.cal.model().Default.Net
		}
		obs = min(max(obs, cur/learnStep), cur*learnStep)
		r.Net = max((1-learnWeight)*cur+learnWeight*obs, learnFloor)
		w.rates[id] = r
	}
}

func destIDs(d map[int]Node) map[int]string {
	out := map[int]string{}
	for i, n := range d {
		out[i] = n.ID
	}
	return out
}

// repairWriter is the Writer of a repair-switched manifest version.
func repairWriter(node string) string { return "repair-" + node }

// switchManifest makes the rebuilt shards part of the object.
//
// The invariant: a repair switch never hides a client write, and never
// points readers at shards that are not durable and verified.
//
//   - It runs only after the executor reported every rebuilt shard durable
//     and verified against the manifest's CRC.
//   - The new manifest is the old one with the rebuilt shards' servers in
//     Placement, and Version {old.TS + 1ns, "repair-<node>"}: newer than
//     the version it repairs (so servers replace it and readers prefer it),
//     older than any client write made after the object was written (a
//     gateway's clock is past old.TS by far more than 1ns by then). A
//     client overwrite racing the switch therefore wins on every server,
//     and the repair's shards become garbage there.
//   - Before writing, the version is fenced: a majority of the live
//     placement servers must still hold exactly the repaired version. If
//     any holds a newer one, the object changed (or another repairer got
//     there first) and the switch is abandoned.
//   - Two repairers racing (membership views disagree) both write
//     old.TS+1 with their own writer IDs; the greater ID wins everywhere.
//   - The switch succeeds when k+1 servers store it (or already hold it),
//     like a PUT. The old placement's live servers get it too, which is
//     how they learn to drop nothing but what was rebuilt elsewhere.
//   - The servers that store it are then told it is on a write quorum
//     (notifyConfirmed), so their confirm jobs for it need not ask their
//     peers; unlike a gateway's notice of a PUT, it is not marked
//     committed for readers (see switchOp).
//
// switchBatch runs many inline objects' switches with the same rules
// and the same judgement of each answer (switchOp), its calls batched
// per server.
func (w *Worker) switchManifest(ctx context.Context, v nodeView, old *metadata.Manifest, rebuilt map[int]Node) error {
	op, err := w.newSwitch(v, old, rebuilt, false)
	if err != nil {
		return err
	}
	// Fence.
	curs := make([]*metadata.Manifest, len(op.oldLive))
	errs := make([]error, len(op.oldLive))
	var g errgroup.Group
	for i, id := range op.oldLive {
		g.Go(func() error {
			curs[i], errs[i] = w.shards.GetManifest(ctx, op.addr(id), old.Bucket, old.Key)
			return nil
		})
	}
	g.Wait()
	for i := range op.oldLive {
		op.fenceAnswer(curs[i], nil, errs[i])
	}
	if err := op.fenced(); err != nil {
		return err
	}

	// Write to the old and the new placement.
	type answer struct {
		stored bool
		cur    metadata.Version
		err    error
	}
	answers := make([]answer, len(op.targets))
	wctx, cancel := context.WithTimeout(ctx, switchWriteTimeout)
	defer cancel()
	for i, id := range op.targets {
		g.Go(func() error {
			a := &answers[i]
			a.stored, a.cur, a.err = w.shards.PutManifest(wctx, op.addr(id), &op.nm)
			return nil
		})
	}
	g.Wait()
	for i, id := range op.targets {
		op.wrote(id, answers[i].stored, answers[i].cur, false, answers[i].err)
	}
	err = op.result()
	w.notifyConfirmed(ctx, v, []*switchOp{op}, []error{err})
	return err
}

// Inline is the Result.Method of an object stored inside its manifest:
// its "repair" is copying the manifest to new servers.
const Inline Method = "inline"

// planInline gives an object stored inside its manifest new placement
// servers for the lost ones: the manifest switch itself writes the
// (whole) object to them. The Result names them (Rebuilt).
func (w *Worker) planInline(v nodeView, m *metadata.Manifest, lost []int, j *job) (Result, error) {
	if j.inPlace {
		return Result{}, fmt.Errorf("%w: %s is inline, nothing to rebuild in place", errRetryLater, j.ref())
	}
	dest, _ := destinations(PlanInput{Group: Group{Key: m.Bucket + "/" + m.Key, Placement: m.Placement}, Nodes: v.nodes}, lost)
	if len(dest) == 0 {
		w.sched.setWaiting(j.ref())
		w.m.decision("waiting")
		return Result{}, fmt.Errorf("%w: %w: %s", errRetryLater, ErrNoCapacity, j.ref())
	}
	res := Result{Method: Inline, Rebuilt: map[int]Node{}}
	for i, id := range dest {
		res.Rebuilt[i] = Node{ID: id, Addr: v.nodes[id].Addr}
	}
	w.m.decision(string(Inline))
	return res, nil
}

// unfinishedSwitch reports whether cur is a repair switch of exactly old
// (the next version, written by a repairer, same object otherwise).
func unfinishedSwitch(old, cur *metadata.Manifest) bool {
	return cur.Version.TS == old.Version.TS+1 && strings.HasPrefix(cur.Version.Writer, repairWriter("")) &&
		len(cur.Placement) == len(old.Placement) && len(cur.Parts) == len(old.Parts) && !cur.Deleted
}
