package repair

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/metadata"
)

// Most recently failed writes (MRF, as MinIO calls its queue).
//
// A PUT is acknowledged with k+1 of n shards and manifests when some of
// its servers are down: until it is healed, the object survives n-k-1
// more failures instead of n-k. The manifest sync that a server's return
// starts (syncer.run) finds such writes too, but only after the next repair
// scan notices the return (--repair-scan, 30 s by default), a settling
// pause, and a comparison of range digests with every peer; the periodic
// sync (--sync-interval) and the repair grace are minutes. The MRF heals
// them as soon as gossip shows the server back.
//
// Each server notes the writes it stores whose placement names a server
// that is not live in its gossip view (NoteWrite), and keeps the writes of
// the last mrfWindow, so that a server that dies before gossip says so
// (its writes fail there while it still counts as live), or restarts
// before anyone sees it die, is covered too: when it turns dead, or comes
// back with a new boot time, the recent writes placed on it are noted
// against it. When a noted server is live again, each holder checks the
// writes it noted with that server: one it lacks is handed its manifest
// and gets its shards rebuilt in place (healMissed), by the first holder
// of the placement, or, after mrfForceAfter rounds, by any holder, in case
// the first one noted nothing (it restarted, or its queue overflowed). A
// write is handed on only once it is visible (k servers hold it: see
// quorumCache), so a failed write is never spread; one that is not (yet) stays queued until it is, or
// until it expires after mrfMaxAge, which leaves it to the periodic sync.
//
// The queue lives in memory: a server that restarts loses its notes, and
// the sync at its start and the other holders' notes cover them. It does
// not replace the periodic sync: a write that failed on a server gossip
// kept for live (a transient error, a full disk) is noted nowhere, and
// only a comparison of what the servers hold finds it.

const (
	// mrfWindow is how long the writes of a server are remembered in case
	// it turns out to have been dead already: longer than gossip takes to
	// declare a dead server dead.
	mrfWindow = time.Minute
	// mrfMaxRecent and mrfMaxMissed bound the memory of the queue; past
	// them the oldest notes go (the periodic sync still finds those
	// writes).
	mrfMaxRecent = 1 << 16
	mrfMaxMissed = 1 << 18
	// mrfPoll is how often the gossip view is checked when no membership
	// event wakes the loop (a return is an event: the poll is a safety
	// net, and each tick wakes an idle server), and mrfRetry how often
	// writes noted against a live server that could not be healed yet are
	// tried again.
	mrfPoll  = 2 * time.Second
	mrfRetry = 2 * time.Second
	// mrfForceAfter is after how many rounds any holder heals a write, not
	// only the placement's first holder.
	mrfForceAfter = 3
	// mrfMaxAge is how long a note is kept.
	mrfMaxAge = time.Hour
)

// mrfRef names one object version.
type mrfRef struct {
	bucket, key string
}

// mrfWrite is a write this server stored.
type mrfWrite struct {
	at        time.Time
	ref       mrfRef
	placement []string
}

// mrfNote is a write a server missed.
type mrfNote struct {
	since  time.Time
	rounds int
	next   time.Time // not tried again before
}

// mrfBackoff is how long a note that could not be healed waits before the
// next try: mrfRetry, doubling, at most a minute, so that writes that stay
// unhealable (fewer than k holders are up) cost little.
func mrfBackoff(rounds int) time.Duration {
	return min(mrfRetry<<min(rounds, 5), time.Minute)
}

// mrfHealer is the MRF service: the writes live servers missed, under its
// own lock, and the loop that heals them (run) with the anti-entropy's
// per-key rules (keys).
type mrfHealer struct {
	self   string
	log    *slog.Logger
	store  Store
	shards Shards
	view   func() nodeView
	now    func() time.Time
	keys   *syncer
	// events wakes the loop on membership changes (nil: it polls).
	events <-chan cluster.Event

	mu     sync.Mutex
	live   map[string]bool // shard servers live at the last look
	boot   map[string]int64
	recent []mrfWrite                     // oldest first
	missed map[string]map[mrfRef]*mrfNote // node ID -> writes it missed
	count  int                            // notes in missed
	wake   chan struct{}
}

// NoteWrite tells the worker that this server stored m as the current
// version of its key: when m's placement names servers gossip does not
// show live, they missed it and are healed when they return. The shard
// server calls it for every manifest that became current; it is cheap
// (no I/O).
func (w *Worker) NoteWrite(m *metadata.Manifest) {
	if w.mrf.noteWrite(m) {
		// A group placed on a server that is not live: the scan must
		// look (it may skip its walk otherwise, scan_skip.go).
		w.scanner.markDirty(walkWrite)
	}
}

// NotePeerInStep tells the worker that peer compared its range digest
// with this server's just now and found them equal (the shard server's
// side of a digest exchange). The periodic sync leaves that peer out
// for an interval: the shared set is the same seen from either side,
// and two servers that each asked the other every interval made twice
// the exchanges an idle cluster needs. A peer that found a difference
// is not noted, so this server compares (and pulls) itself.
func (w *Worker) NotePeerInStep(peer string) {
	w.syncer.noteInStep(peer, w.now())
}

// noteWrite notes m (see NoteWrite); it reports whether m's placement
// names a server not live.
func (q *mrfHealer) noteWrite(m *metadata.Manifest) (missed bool) {
	if m == nil || len(m.Placement) == 0 {
		return false
	}
	now := q.now()
	ref := mrfRef{m.Bucket, m.Key}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.trim(now)
	if len(q.recent) >= mrfMaxRecent {
		q.recent = q.recent[1:]
	}
	q.recent = append(q.recent, mrfWrite{at: now, ref: ref, placement: slices.Clone(m.Placement)})
	if len(q.live) == 0 {
		return false // no view yet: the first look at the members notes these
	}
	for _, id := range m.Placement {
		if id != q.self && !q.live[id] {
			q.note(id, ref, now)
			missed = true
		}
	}
	return missed
}

// trim drops the recent writes older than mrfWindow.
func (q *mrfHealer) trim(now time.Time) {
	i := 0
	for i < len(q.recent) && now.Sub(q.recent[i].at) > mrfWindow {
		i++
	}
	q.recent = q.recent[i:]
}

func (q *mrfHealer) note(id string, ref mrfRef, now time.Time) {
	set := q.missed[id]
	if set == nil {
		set = map[mrfRef]*mrfNote{}
		q.missed[id] = set
	}
	if _, ok := set[ref]; ok {
		return
	}
	if q.count >= mrfMaxMissed {
		return // full: the periodic sync finds the rest
	}
	set[ref] = &mrfNote{since: now}
	q.count++
}

func (q *mrfHealer) done(id string, ref mrfRef) {
	if set := q.missed[id]; set != nil {
		if _, ok := set[ref]; ok {
			delete(set, ref)
			q.count--
		}
		if len(set) == 0 {
			delete(q.missed, id)
		}
	}
}

// look compares the gossip view with the last one: servers that turned
// dead or restarted get the recent writes placed on them noted, and it
// returns whether a server with notes is back.
func (q *mrfHealer) look(v nodeView, self string, now time.Time) (back bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.trim(now)
	first := len(q.live) == 0
	for id, ni := range v.nodes {
		if id == self {
			continue
		}
		was, seen := q.live[id]
		restarted := seen && q.boot[id] != 0 && v.boot[id] != q.boot[id]
		if (!ni.Live && (was || first)) || restarted {
			// It may have been dead for a while before gossip said so (or
			// restarted unseen): the recent writes placed on it missed it.
			for _, wr := range q.recent {
				if slices.Contains(wr.placement, id) {
					q.note(id, wr.ref, now)
				}
			}
		}
		if ni.Live && (!was || restarted) && len(q.missed[id]) > 0 {
			back = true
			for _, n := range q.missed[id] {
				n.next = time.Time{} // try at once
			}
		}
		q.live[id] = ni.Live
		if v.boot[id] != 0 {
			q.boot[id] = v.boot[id]
		}
	}
	return back
}

// pending returns the live servers with notes.
func (q *mrfHealer) pending() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for id, set := range q.missed {
		if q.live[id] && len(set) > 0 {
			out = append(out, id)
		}
	}
	return out
}

// run heals the writes returned servers missed, woken by membership
// events (q.events may be nil) and polling the gossip view every mrfPoll,
// until ctx ends.
func (q *mrfHealer) run(ctx context.Context) {
	tick := time.NewTicker(mrfPoll)
	defer tick.Stop()
	var lastPass time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.events:
		case <-q.wake:
		case <-tick.C:
		}
		back := q.look(q.view(), q.self, q.now())
		if !back && q.now().Sub(lastPass) < mrfRetry {
			continue
		}
		lastPass = q.now()
		if n := q.pass(ctx); n > 0 {
			q.log.Info("mrf: healed writes returned servers missed", "writes", n)
		}
	}
}

// pass tries every write noted against a live server once; it returns
// how many are whole there now.
func (q *mrfHealer) pass(ctx context.Context) int {
	ids := q.pending()
	if len(ids) == 0 {
		return 0
	}
	v := q.view()
	type item struct {
		id    string
		ref   mrfRef
		force bool
	}
	var items []item
	now := q.now()
	q.mu.Lock()
	for _, id := range ids {
		for ref, n := range q.missed[id] {
			if now.Sub(n.since) > mrfMaxAge {
				q.done(id, ref)
				continue
			}
			if now.Before(n.next) {
				continue
			}
			n.rounds++
			n.next = now.Add(mrfBackoff(n.rounds))
			items = append(items, item{id, ref, n.rounds > mrfForceAfter})
		}
	}
	q.mu.Unlock()
	quorums := newQuorumCache(q.keys.codes)
	var mu sync.Mutex
	healed := 0
	var g errgroup.Group
	g.SetLimit(8)
	for _, it := range items {
		g.Go(func() error {
			if q.heal(ctx, v, it.id, it.ref, it.force, quorums) {
				q.mu.Lock()
				q.done(it.id, it.ref)
				q.mu.Unlock()
				mu.Lock()
				healed++
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	return healed
}

// heal heals one write server id missed; it returns true when there is
// nothing left to do for it here (id holds the version and its shards, or
// the key moved on or away from id).
func (q *mrfHealer) heal(ctx context.Context, v nodeView, id string, ref mrfRef, force bool, quorums *quorumCache) bool {
	m, err := q.store.GetManifest(ctx, ref.bucket, ref.key)
	if errors.Is(err, metadata.ErrNotFound) {
		return true
	}
	if err != nil {
		return false
	}
	idx := slices.Index(m.Placement, id)
	ni := v.nodes[id]
	if idx < 0 {
		return true
	}
	if !ni.Live {
		return false
	}
	if q.holdsWhole(ctx, ni.Addr, m, idx) {
		return true
	}
	answers := q.keys.askPeers(ctx, v, m)
	if best := confirmedNewer(m, answers, quorums); best != nil {
		// This server is behind itself: take the newer version; the
		// next round checks id against it.
		if self := v.nodes[v.self]; self.Addr != "" {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			q.shards.PutManifest(cctx, self.Addr, best)
			cancel()
		}
		return false
	}
	q.keys.healMissed(ctx, v, m, answers, quorums, force)
	return false
}

// holdsWhole reports whether the server at addr holds m (or a newer
// version) as current and, when it holds m, its shard idx of every part.
func (q *mrfHealer) holdsWhole(ctx context.Context, addr string, m *metadata.Manifest, idx int) bool {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cur, err := q.shards.GetManifest(cctx, addr, m.Bucket, m.Key)
	if err != nil || cur.Version.Less(m.Version) {
		return false
	}
	if cur.Version != m.Version {
		return true // a newer write reached it: that one is its holders' to heal
	}
	for _, p := range m.Parts {
		info, err := q.shards.StatShard(cctx, addr, p.ID, idx)
		if err != nil || (idx < len(p.ShardCRC) && info.CRC != p.ShardCRC[idx]) {
			return false
		}
	}
	return true
}
