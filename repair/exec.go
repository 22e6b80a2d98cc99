package repair

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/stripe"
)

// RepairClient is what an Executor needs from shard servers: the control
// requests that start server-side repairs, and deletes to clean up after
// a failure. *shardrpc.Client implements it; give it an HTTP client
// without a response-header timeout (shardrpc.NewRepairHTTPClient), since
// a repair answers only when its data has moved.
type RepairClient interface {
	RepairPull(ctx context.Context, addr string, req shardrpc.PullRequest) (shardrpc.RepairReport, error)
	RepairCore(ctx context.Context, addr string, req shardrpc.CoreRequest) (shardrpc.RepairReport, error)
	RepairPush(ctx context.Context, addr string, req shardrpc.PushRequest, body io.Reader) (shardrpc.RepairReport, error)
	RepairCopy(ctx context.Context, addr string, req shardrpc.CopyRequest) (shardrpc.RepairReport, error)
	DeleteShard(ctx context.Context, addr, fileID string, idx int) error
}

// DefaultSRU is the slice size when a task names none: big enough that
// per-slice overhead is small, small enough that a chain of k hops fills
// in milliseconds.
const DefaultSRU = 256 << 10

// Executor carries out repair tasks over the shard servers' repair
// endpoints. It sends only control requests: shard data moves between the
// servers (helpers, chain hops, relayers, destinations), never through the
// executor's process. Each rebuilt shard is stored only after its size and
// CRC-32C match the task's ShardCRC, so a Result's Rebuilt shards are safe
// to switch the manifest to. Safe for concurrent use.
type Executor struct {
	Client RepairClient
	Log    *slog.Logger // nil: discard
	// Codes shares code values (and their plan caches); the zero value is
	// fine.
	Codes codec.Registry
}

// NewExecutor returns an Executor over client.
func NewExecutor(client RepairClient, log *slog.Logger) *Executor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Executor{Client: client, Log: log}
}

// Run repairs one stripe group as t says. On error nothing of the task
// stays visible (stored shards are deleted again) and the error is an
// *ExecError naming the node to blame, when one is.
func (e *Executor) Run(ctx context.Context, t Task) (Result, error) {
	start := time.Now()
	op := string(t.Method)
	if err := t.Validate(); err != nil {
		return Result{}, &ExecError{Op: op, Err: err}
	}
	ep, err := e.prepare(t)
	if err != nil {
		return Result{}, &ExecError{Op: op, Err: err}
	}
	var rep shardrpc.RepairReport
	switch t.Method {
	case PullRep:
		rep, err = e.pullRep(ctx, ep)
	case PullSur:
		rep, err = e.pullSur(ctx, ep)
	case PushRep:
		rep, err = e.pushRep(ctx, ep)
	case PushSur:
		rep, err = e.pushSur(ctx, ep)
	case Core:
		rep, err = e.core(ctx, ep)
	case Copy:
		rep, err = e.copy(ctx, ep)
	default:
		err = fmt.Errorf("unknown method %q", t.Method)
	}
	if err == nil {
		err = ep.checkStored(rep)
	}
	if err != nil {
		e.cleanup(ep)
		xe := &ExecError{Node: ep.blame(err), Op: op, Err: err}
		e.log().Warn("repair failed", "file", t.FileID, "method", t.Method, "lost", t.Lost, "blame", xe.Node, "err", err)
		return Result{}, xe
	}
	res := Result{Method: t.Method, Seconds: time.Since(start).Seconds(), Rebuilt: map[int]Node{}}
	res.NodeIn = map[string]int64{}
	for id, b := range rep.Traffic {
		res.NodeIn[id] = b.In
		res.BytesMoved += b.In
		res.MaxNodeIn = max(res.MaxNodeIn, b.In)
	}
	for _, s := range rep.Stored {
		res.Rebuilt[s.Idx] = Node{ID: s.ID, Addr: s.Addr}
	}
	e.log().Debug("repaired", "file", t.FileID, "method", t.Method, "lost", t.Lost, "bytes_moved", res.BytesMoved, "seconds", res.Seconds)
	return res, nil
}

func (e *Executor) log() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

// execPlan is a validated task with everything the methods derive from it.
type execPlan struct {
	Task
	code      codec.Code
	group     shardrpc.RepairGroup
	targets   map[int]shardrpc.RepairTarget
	survivors []int // live shard indexes, in helper order
	sru       int
}

func (e *Executor) prepare(t Task) (*execPlan, error) {
	c, err := e.Codes.Get(t.Code)
	if err != nil {
		return nil, err
	}
	n, k := c.TotalShards(), c.DataShards()
	if len(t.Placement) != n {
		return nil, fmt.Errorf("placement has %d servers, %s needs %d", len(t.Placement), t.Code, n)
	}
	if lost := len(t.Lost) + len(t.Unavailable); lost > n-k && t.Method != Copy {
		// NB: a copy's shards are not lost; any number may move at once.
		return nil, fmt.Errorf("%d lost shards: %s tolerates %d", lost, t.Code, n-k)
	}
	size := stripe.Geometry(c, t.ChunkSize).ShardFileSize(t.PartSize)
	ep := &execPlan{
		Task: t, code: c,
		group:   shardrpc.RepairGroup{Code: t.Code, FileID: t.FileID, ChunkSize: t.ChunkSize, PartSize: t.PartSize},
		targets: map[int]shardrpc.RepairTarget{},
		sru:     t.SRU,
	}
	if ep.sru == 0 {
		ep.sru = DefaultSRU
	}
	for _, i := range t.Lost {
		d := t.Dest[i]
		ep.targets[i] = shardrpc.RepairTarget{Idx: i, ID: d.ID, Addr: d.Addr, Size: size, CRC: t.ShardCRC[i]}
	}
	ep.survivors = DefaultHelpers(t)
	if len(t.Helpers) > 0 {
		for _, h := range t.Helpers {
			if h < 0 || h >= n || slices.Contains(t.Lost, h) || slices.Contains(t.Unavailable, h) {
				return nil, fmt.Errorf("helper %d is lost or out of range", h)
			}
		}
		// NB: the given helpers first, in their order, then the other
		// survivors (PULL-Sur and PUSH-Sur may need more than k).
		rest := slices.DeleteFunc(slices.Clone(ep.survivors), func(i int) bool { return slices.Contains(t.Helpers, i) })
		ep.survivors = append(slices.Clone(t.Helpers), rest...)
	}
	if len(ep.survivors) < k && t.Method != Copy {
		return nil, fmt.Errorf("%d survivors, need %d", len(ep.survivors), k)
	}
	return ep, nil
}

// DefaultHelpers orders a task's survivors (neither lost nor unavailable)
// for when Task.Helpers is empty: ascending shard index, rotated by a
// hash of the file ID, so the many groups of a full-node repair spread
// chain ends, decoders and first hops over all survivors instead of
// always loading the same ones.
func DefaultHelpers(t Task) []int {
	var s []int
	for i := range t.Placement {
		if !slices.Contains(t.Lost, i) && !slices.Contains(t.Unavailable, i) {
			s = append(s, i)
		}
	}
	if len(s) == 0 {
		return s
	}
	h := fnv.New32a()
	h.Write([]byte(t.FileID))
	r := int(h.Sum32() % uint32(len(s)))
	return append(s[r:], s[:r]...)
}

func (ep *execPlan) peer(idx int) shardrpc.RepairPeer {
	n := ep.Placement[idx]
	return shardrpc.RepairPeer{ID: n.ID, Addr: n.Addr, Idx: idx}
}

func (ep *execPlan) peers(idxs []int) []shardrpc.RepairPeer {
	ps := make([]shardrpc.RepairPeer, len(idxs))
	for i, idx := range idxs {
		ps[i] = ep.peer(idx)
	}
	return ps
}

func (ep *execPlan) targetList(lost []int) []shardrpc.RepairTarget {
	ts := make([]shardrpc.RepairTarget, len(lost))
	for i, l := range lost {
		ts[i] = ep.targets[l]
	}
	return ts
}

// pullRep: the destination of the first lost shard reads k shards,
// decodes every lost shard and stores them (its own locally, the others
// on their destinations).
func (e *Executor) pullRep(ctx context.Context, ep *execPlan) (shardrpc.RepairReport, error) {
	k := ep.code.DataShards()
	relayer := ep.targets[ep.Lost[0]]
	return e.Client.RepairPull(ctx, relayer.Addr, shardrpc.PullRequest{
		Method: string(PullRep), RepairGroup: ep.group, Sources: ep.peers(ep.survivors[:k]),
		Targets: ep.targetList(ep.Lost), SRU: ep.sru,
	})
}

// pullSur: lost shard j is decoded on survivor j of the helper order
// (which reads its own shard from disk and k-1 others) and stored on its
// destination; the t decodes run at once.
func (e *Executor) pullSur(ctx context.Context, ep *execPlan) (shardrpc.RepairReport, error) {
	k := ep.code.DataShards()
	return e.fanOut(ctx, ep.Lost, func(ctx context.Context, j, lost int) (shardrpc.RepairReport, error) {
		dec := ep.survivors[j%len(ep.survivors)]
		srcs := []int{dec}
		for _, s := range ep.survivors {
			if len(srcs) == k {
				break
			}
			if s != dec {
				srcs = append(srcs, s)
			}
		}
		return e.Client.RepairPull(ctx, ep.Placement[dec].Addr, shardrpc.PullRequest{
			Method: string(PullSur), RepairGroup: ep.group, Sources: ep.peers(srcs),
			Targets: ep.targetList([]int{lost}), SRU: ep.sru,
		})
	})
}

// pushRep: one chain of k survivors carries one partial slice per lost
// shard; its last hop sends the finished slices to the destinations.
func (e *Executor) pushRep(ctx context.Context, ep *execPlan) (shardrpc.RepairReport, error) {
	k := ep.code.DataShards()
	chain := ep.peers(ep.survivors[:k])
	return e.Client.RepairPush(ctx, chain[0].Addr, shardrpc.PushRequest{
		Method: string(PushRep), RepairGroup: ep.group, Lost: ep.Lost, Chain: chain,
		Targets: ep.targetList(ep.Lost), SRU: ep.sru,
	}, nil)
}

// pushSur: one chain per lost shard, each of k survivors, rotated so the
// t chains start and end on different survivors and share the load.
func (e *Executor) pushSur(ctx context.Context, ep *execPlan) (shardrpc.RepairReport, error) {
	k, s := ep.code.DataShards(), len(ep.survivors)
	return e.fanOut(ctx, ep.Lost, func(ctx context.Context, j, lost int) (shardrpc.RepairReport, error) {
		idxs := make([]int, k)
		shift := j * max(1, s/len(ep.Lost))
		for i := range k {
			idxs[i] = ep.survivors[(shift+i)%s]
		}
		chain := ep.peers(idxs)
		return e.Client.RepairPush(ctx, chain[0].Addr, shardrpc.PushRequest{
			Method: string(PushSur), RepairGroup: ep.group, Lost: []int{lost}, Chain: chain,
			Targets: ep.targetList([]int{lost}), SRU: ep.sru,
		}, nil)
	})
}

// core: the destination of the first lost shard is the relayer; every
// survivor is offered as helper and the code's plan picks who sends what.
func (e *Executor) core(ctx context.Context, ep *execPlan) (shardrpc.RepairReport, error) {
	relayer := ep.targets[ep.Lost[0]]
	return e.Client.RepairCore(ctx, relayer.Addr, shardrpc.CoreRequest{
		Method: string(Core), RepairGroup: ep.group, Lost: ep.Lost, Erased: ep.Unavailable,
		Helpers: ep.peers(ep.survivors), Targets: ep.targetList(ep.Lost),
	})
}

// copy: each destination copies its shard from the draining server that
// holds it; the copies run at once.
func (e *Executor) copy(ctx context.Context, ep *execPlan) (shardrpc.RepairReport, error) {
	return e.fanOut(ctx, ep.Lost, func(ctx context.Context, _, idx int) (shardrpc.RepairReport, error) {
		t := ep.targets[idx]
		return e.Client.RepairCopy(ctx, t.Addr, shardrpc.CopyRequest{
			Method: string(Copy), RepairGroup: ep.group, Source: ep.peer(idx), Target: t, SRU: ep.sru,
		})
	})
}

// fanOut runs one sub-repair per lost shard at once and merges their
// reports; the first failure cancels the others.
func (e *Executor) fanOut(ctx context.Context, lost []int, f func(ctx context.Context, j, lost int) (shardrpc.RepairReport, error)) (shardrpc.RepairReport, error) {
	g, gctx := errgroup.WithContext(ctx)
	reps := make([]shardrpc.RepairReport, len(lost))
	for j, l := range lost {
		g.Go(func() error {
			r, err := f(gctx, j, l)
			reps[j] = r
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return shardrpc.RepairReport{}, err
	}
	var out shardrpc.RepairReport
	for _, r := range reps {
		out.Merge(r)
	}
	return out, nil
}

// checkStored makes sure every lost shard was stored on its destination.
func (ep *execPlan) checkStored(rep shardrpc.RepairReport) error {
	for _, l := range ep.Lost {
		want := ep.targets[l]
		if !slices.ContainsFunc(rep.Stored, func(s shardrpc.RepairTarget) bool { return s.Idx == l && s.ID == want.ID }) {
			return fmt.Errorf("shard %d was not reported stored on %s", l, want.ID)
		}
	}
	return nil
}

// cleanup deletes whatever the failed task may have stored: a complete,
// verified shard of a failed multi-shard repair must not linger as if the
// group had been repaired. Best effort: the orphan sweep catches the rest.
func (e *Executor) cleanup(ep *execPlan) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, l := range ep.Lost {
		d := ep.targets[l]
		if err := e.Client.DeleteShard(ctx, d.Addr, ep.FileID, l); err != nil {
			e.log().Debug("cleanup of a failed repair", "file", ep.FileID, "idx", l, "node", d.ID, "err", err)
		}
	}
}

// blame names the node err is due to: the one a server blamed, else the
// one whose address failed.
func (ep *execPlan) blame(err error) string {
	var rf *shardrpc.RepairFailure
	if errors.As(err, &rf) {
		return rf.Node
	}
	var ne *shardrpc.NodeError
	if errors.As(err, &ne) {
		for _, n := range ep.Placement {
			if n.Addr == ne.Addr {
				return n.ID
			}
		}
		for _, n := range ep.Dest {
			if n.Addr == ne.Addr {
				return n.ID
			}
		}
	}
	return ""
}
