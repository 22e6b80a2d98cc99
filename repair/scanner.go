package repair

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/pause"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// scanner is the background service that finds the stripe groups this
// server coordinates that lost shards (or have shards on draining
// servers) and queues their repair, every ScanInterval, skipping the walk
// over the manifests while nothing changed (scan_skip.go). It owns the
// stripe counts, the last walk and the last membership it saw, under its
// own lock. What a repair's outcome or a write changes reaches it through
// markDirty.
type scanner struct {
	// interval is Config.ScanInterval, fullEvery Config.FullScanInterval,
	// grace Config.Grace.
	interval, fullEvery, grace time.Duration
	log                        *slog.Logger
	store                      Store
	shards                     Shards
	m                          *metrics
	codes                      *codec.Cache
	view                       func() nodeView
	now                        func() time.Time
	// loss tells whether a node is down and whether its shards count
	// as lost (Worker.status).
	loss func(v nodeView, id string) (down, lost bool)
	jobs scanJobs
	sync interface{ kick() }

	mu      sync.Mutex
	stripes shardrpc.StripeCounts
	// walk: the last full walk (scan_skip.go).
	walk walkState
	// prevNodes is each node's state at the last scan.
	prevNodes map[string]nodeMark
	// dirty: something happened since the last walk that may have left a
	// group degraded (scan_skip.go), and what (walkJob, walkWrite); nil:
	// nothing. An atomic, so that it is set without the lock from under
	// other services' locks.
	dirty atomic.Pointer[string]
	// wake is signalled when the repair queue drains after a covered walk
	// (drained); capacity 1.
	wake chan struct{}
}

// scanJobs is the repair queue a scan feeds and reports to (the Worker).
type scanJobs interface {
	enqueue(j *job) bool
	// isWaiting reports whether the job ref names waits for a server
	// to rebuild onto; idle whether no job is queued or running.
	isWaiting(ref string) bool
	idle() bool
	// scanning is told the view at the start of each scan, scanned after
	// each that did not fail.
	scanning(v nodeView)
	scanned(ctx context.Context, v nodeView)
	// holdEnded, from just before a walk installs its counts until
	// releaseEnded after it queued what it found, keeps out of the queue
	// the groups whose jobs came off the counts meanwhile: queued again,
	// such a group's next job would find it repaired and take it off the
	// counts a second time (errNotDegraded), hiding another group.
	holdEnded()
	releaseEnded()
}

// run scans every interval (less often when walks are slow: walkWait)
// until ctx ends.
func (s *scanner) run(ctx context.Context) {
	if !settle(ctx, func() string { return walkSignature(s.view()) }, viewSettle, viewSettleMax) {
		return
	}
	for {
		start := time.Now()
		if err := s.once(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("repair scan", "err", err)
			s.mu.Lock()
			s.stripes.ScanError = err.Error()
			s.mu.Unlock()
		}
		if !s.waitNext(ctx, start, time.Since(start)) {
			return
		}
	}
}

// waitNext waits after a walk that began at start and took took, until
// the next scan is due (walkWait) or, if the repair queue drains first
// (drained), until an interval has passed since start. It reports false
// if ctx ended.
//
// The drain walk checks every group the repair took and corrects the
// counts of those it did not end (a job superseded or deferred): until it
// runs, the status reports them degraded. A walk made while the repair ran
// beside it is slow for the repair's load, not for the manifests (a
// million-object server's took over a minute), and paced by it the drain
// walk came minutes after the last job, with one server still reporting
// 825 groups degraded. One walk per drain is not the idle cost walkPace
// bounds: a drain follows a repair.
func (s *scanner) waitNext(ctx context.Context, start time.Time, took time.Duration) bool {
	t := time.NewTimer(walkWait(s.interval, took))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-s.wake:
		return pause.For(ctx, s.interval-time.Since(start)) == nil
	}
}

// drained tells the scanner that the repair queue is idle again. It wakes
// a scan waiting after a covered walk (one that found groups to repair
// and queued them all); after any other walk it does nothing, so jobs
// that trickle in (a write that named a server not live, a scrub) do not
// unpace the walks.
func (s *scanner) drained() {
	s.mu.Lock()
	covered := s.walk.covered
	s.mu.Unlock()
	if !covered {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// once runs one scan with the membership of the moment.
func (s *scanner) once(ctx context.Context) error {
	v := s.view()
	s.jobs.scanning(v)
	if err := s.scan(ctx, v); err != nil {
		return err
	}
	s.jobs.scanned(ctx, v)
	return nil
}

// markDirty notes that something happened that the next scan must walk
// for (why: walkJob, a repair job failed or was deferred; walkWrite, a
// write named a server not live).
func (s *scanner) markDirty(why string) { s.dirty.Store(&why) }

// status returns the stripe counts of the last scan.
func (s *scanner) status() shardrpc.StripeCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stripes
}

// The first scan waits until the membership has stayed the same for
// viewSettle (viewSettleMax at most). Servers of a cluster start over
// seconds, and a restarted one learns its peers over a few gossip rounds:
// a walk made meanwhile finds placement servers unknown or suspect, and
// the next view differs, so every manifest is walked again -- as late as
// walkPace allows after a first walk slowed by the start (3.5 minutes
// after a million-object dev cluster started, 3 s of CPU on most of its
// servers, in what should have been an idle cluster). No repair can start
// within the grace anyway.
const (
	viewSettle    = 2 * time.Second
	viewSettleMax = 30 * time.Second
	settlePoll    = 250 * time.Millisecond
)

// settle waits until sig() has returned the same for quiet, or for max in
// all. It reports false if ctx ended first. It runs on the real clock:
// tests' fake clocks do not move while it sleeps.
func settle(ctx context.Context, sig func() string, quiet, max time.Duration) bool {
	start := time.Now()
	last, since := sig(), start
	t := time.NewTicker(settlePoll)
	defer t.Stop()
	for {
		now := time.Now()
		if now.Sub(since) >= quiet || now.Sub(start) >= max {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if cur := sig(); cur != last {
			last, since = cur, time.Now()
		}
	}
}

// walkPace bounds the time the walks over every local manifest (the
// repair scan, the scrubber's) take: after a walk of d the next starts no
// sooner than walkPace*d later, so walking takes at most a fifth of a
// core however many objects the server holds. Without it a server with
// more manifests than it can walk in one interval (or twelve servers on
// one machine, as in regen dev) would walk back to back and keep its
// cores busy while idle.
const walkPace = 4

// walkWait is how long to wait after a walk that took took, for walks
// meant to start every interval.
func walkWait(interval, took time.Duration) time.Duration {
	return max(interval-took, walkPace*took)
}

// eachManifest calls fn for every live manifest in the local store:
// erasure-coded objects and small objects stored inline in their
// manifest (no parts; their placement servers hold the manifest). The
// manifests come without their inline data, which no walk needs.
func eachManifest(ctx context.Context, store Store, fn func(*metadata.Manifest) error) error {
	err := store.EachManifest(ctx, func(m *metadata.Manifest) error {
		if len(m.Placement) == 0 {
			return nil
		}
		return fn(m)
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("repair: walk manifests: %w", err)
	}
	return err
}

// scan walks the local manifests of view v, counts the stripe groups this
// server coordinates and queues the repair of those with lost shards.
func (s *scanner) scan(ctx context.Context, v nodeView) error {
	s.noteReturns(v)
	sig := walkSignature(v)
	if !s.needWalk(sig) {
		return nil
	}
	t0 := s.now()
	var counts shardrpc.StripeCounts
	var found []*job
	unknown := map[string]bool{} // placement nodes gossip never showed this worker
	visit := func(m *metadata.Manifest, noncurrent bool) error {
		if coordinator(v, m.Placement) != v.self {
			return nil
		}
		parts := int64(max(len(m.Parts), 1)) // an inline object is one group
		counts.Total += parts
		if noncurrent {
			counts.Noncurrent += parts
		}
		var downs, lost []int
		for i, id := range m.Placement {
			d, l := s.loss(v, id)
			if d {
				downs = append(downs, i)
				if _, known := v.nodes[id]; !known {
					unknown[id] = true
				}
			}
			if l {
				lost = append(lost, i)
			}
		}
		if len(downs) == 0 {
			// Fully redundant: only shards on draining servers may
			// need a new home.
			if moves := draining(v, m.Placement); len(moves) > 0 {
				j := jobOf(m, noncurrent, parts, moves)
				j.move = true
				counts.Draining += parts
				if s.jobs.isWaiting(j.ref()) {
					counts.DrainWaiting += parts
				}
				found = append(found, j)
			}
			return nil
		}
		counts.Degraded += parts
		counts.LostShards += parts * int64(len(downs))
		if len(lost) == 0 {
			counts.Pending += parts
		}
		if len(lost) > 0 && s.coalesce(v, m, downs, lost) {
			counts.Pending += parts // the rest of its failures turn lost soon
			return nil
		}
		if len(lost) > 0 {
			j := jobOf(m, noncurrent, parts, lost)
			j.prio = len(downs)
			if s.jobs.isWaiting(j.ref()) {
				counts.Waiting += parts
			}
			found = append(found, j)
		}
		return nil
	}
	err := eachManifest(ctx, s.store, func(m *metadata.Manifest) error { return visit(m, false) })
	if err == nil {
		// NB: a versioned bucket's noncurrent versions keep their stripes
		// and are repaired (and moved off draining servers) alike, and
		// counted alike in the status.
		err = eachVersion(ctx, s.store, func(m *metadata.Manifest) error { return visit(m, true) })
	}
	if err != nil {
		return err
	}
	// Down servers, and when the first still within the grace turns lost.
	for id := range unknown {
		counts.DownSeen = append(counts.DownSeen, id)
	}
	for id, ni := range v.nodes {
		if !ni.Live || ni.Suspect {
			counts.DownSeen = append(counts.DownSeen, id)
		} else {
			counts.UpSeen = append(counts.UpSeen, id)
		}
		if ni.Live || v.replaced[id] {
			continue
		}
		if left := s.grace - s.now().Sub(v.since[id]); left > 0 && counts.Pending > 0 {
			if secs := left.Seconds(); counts.GraceLeft == 0 || secs < counts.GraceLeft {
				counts.GraceLeft = secs
			}
		}
	}
	slices.Sort(counts.DownSeen)
	slices.Sort(counts.UpSeen)
	counts.Scanned = s.now().UTC().Format(time.RFC3339Nano)
	// NB: held before the counts are installed: a job that takes its
	// group off these counts is then kept out of the queue below.
	s.jobs.holdEnded()
	defer s.jobs.releaseEnded()
	s.mu.Lock()
	s.stripes = counts
	s.mu.Unlock()
	s.walked(t0, sig, counts.Degraded == 0 && counts.Draining == 0 && len(unknown) == 0 && len(found) == 0,
		counts.Pending == 0 && counts.Waiting == 0 && counts.DrainWaiting == 0 && len(unknown) == 0)
	s.m.stripes(counts)
	for _, j := range found {
		s.jobs.enqueue(j)
	}
	return nil
}

// coalesceWindow bounds how long a stripe group with lost shards waits
// for its other down servers to turn lost too (see coalesce).
const coalesceWindow = 30 * time.Second

// jobOf is the job for the lost (or moved) shards of m's stripe groups
// (parts of them), as the scan saw them. Its strings are copies: the
// decoder's share the buffer of the whole manifest record, and tens of
// thousands of queued jobs kept each one alive (~33 MiB on each server
// of a million-object repair, through the version's writer; names alone
// were copied before).
func jobOf(m *metadata.Manifest, noncurrent bool, parts int64, lost []int) *job {
	return &job{bucket: strings.Clone(m.Bucket), key: strings.Clone(m.Key), version: m.Version.Clone(), lost: lost,
		noncurrent: noncurrent, inline: len(m.Parts) == 0, width: len(m.Placement), parts: int(parts)}
}

// coalesce reports whether the group of m should wait before repairing
// lost: some of its other down servers are still inside the grace and turn
// lost within coalesceWindow. Servers that die together (a rack, a power
// cut, an operator's kill) are declared dead a few probe rounds apart;
// rebuilding them one at a time would move the group's data twice, where
// one concurrent repair (CORE, or one PULL decode for every lost shard)
// moves it once. A group left without redundancy does not wait.
func (s *scanner) coalesce(v nodeView, m *metadata.Manifest, downs, lost []int) bool {
	if len(downs) == len(lost) || len(m.Parts) == 0 {
		return false
	}
	if c, err := s.codes.Get(m.Code); err != nil || len(downs) >= c.ParityShards() {
		return false
	}
	isLost := map[int]bool{}
	for _, i := range lost {
		isLost[i] = true
	}
	window := min(coalesceWindow, s.grace)
	for _, i := range downs {
		if isLost[i] {
			continue
		}
		since, ok := v.since[m.Placement[i]]
		if !ok || s.grace-s.now().Sub(since) > window {
			return false
		}
	}
	return true
}

// draining returns the indexes of pl whose servers are live and draining:
// the shards a drain moves. (A draining server that died holds lost
// shards, which repair rebuilds like any other's.)
func draining(v nodeView, pl []string) []int {
	var out []int
	for i, id := range pl {
		if ni := v.nodes[id]; ni.Live && ni.Draining {
			out = append(out, i)
		}
	}
	return out
}

// nodeMark is what noteReturns compares between scans.
type nodeMark struct {
	live  bool
	since time.Time
	boot  int64
}

// noteReturns starts a manifest sync when a server came back: it (or
// this one, after a partition) may hold manifests the other missed. A
// server is back when it is live and, at the last scan, it was not, or
// it has gone down and up again since (its state changed), or it
// restarted (a new boot time), however quickly: a server restarted
// before anyone saw it die missed writes all the same.
//
// The returned server is asked to sync too: it may not know it was gone.
// A process paused (SIGSTOP, a long GC or VM stall) or starved of CPU
// past the grace is called dead by the others, who rebuild its shards
// elsewhere; from its own side nothing happened, so without being told
// it would keep its stale manifests and the shard files they name.
func (s *scanner) noteReturns(v nodeView) {
	s.mu.Lock()
	first := len(s.prevNodes) == 0
	var back []string // addresses of the servers back
	for id, ni := range v.nodes {
		mark := nodeMark{live: ni.Live, since: v.since[id], boot: v.boot[id]}
		if prev, ok := s.prevNodes[id]; ni.Live && !first && (!ok || !prev.live || !prev.since.Equal(mark.since) || prev.boot != mark.boot) {
			back = append(back, ni.Addr)
		}
		s.prevNodes[id] = mark
	}
	for id := range s.prevNodes {
		if _, ok := v.nodes[id]; !ok {
			delete(s.prevNodes, id)
		}
	}
	s.mu.Unlock()
	if len(back) == 0 {
		return
	}
	s.sync.kick()
	if r, ok := s.shards.(syncRequester); ok {
		for _, addr := range back {
			if addr == "" || addr == v.nodes[v.self].Addr {
				continue
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := r.RequestSync(ctx, addr); err != nil {
					s.log.Debug("ask a returned server to sync", "addr", addr, "err", err)
				}
			}()
		}
	}
}

// syncRequester asks a peer to sync its manifests (*shardrpc.Client has
// it).
type syncRequester interface {
	RequestSync(ctx context.Context, addr string) error
}
