package repair

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Manifest anti-entropy. A server that was down missed the manifest
// switches of the repairs done meanwhile (and overwrites and deletes):
// its own copies still place shards on it. When it starts, and whenever
// a peer comes back, it syncs with the other live servers: the keys where
// they differ get the per-key rules below, which store anything newer a
// quorum holds through its own shard API. The shard server then
// garbage-collects, after its GC delay, the shard files the newer
// manifest no longer places on it. A repair switch is only written after
// the rebuilt copies are durable, so this never drops the last copy.
//
// Finding those keys costs in proportion to what differs, not to what is
// held (antientropy.go, metadata/digest.go): each server keeps range sums
// of the live manifests it shares with each peer, compares them with the
// peer's in one call, lists only the ranges that differ and runs the
// per-key rules only for its own manifests the peer lacks at their
// version. (Issue 18: the walk over every manifest with a question to
// every peer of each took 20-45 s at each regen dev restart over 1,000
// objects.)
//
// Every SyncInterval a server does the same comparison: that is how a
// write that missed a server which never went away (no death, no return,
// nothing for the MRF queue of mrf.go to note) gets healed. Keys written
// within the last interval are left to the next pass, so that it never
// races a write still reaching its servers.
//
// The per-key rules (askPeers, confirmedNewer, healMissed) carry the
// guarantees of docs/CONSISTENCY.md: only a version k servers hold is
// taken or handed on, and only by the first holder of its placement.

// syncer is the anti-entropy service: the full syncs asked for (kick) and
// the periodic ones (run), and the per-key rules the MRF healing and a
// fenced repair (syncKey) use too. It owns the sync counts and their lock;
// the in-place rebuilds the rules find go to the worker's queue (rebuild).
type syncer struct {
	self string
	// interval is Config.SyncInterval.
	interval time.Duration
	log      *slog.Logger
	store    Store
	shards   Shards
	m        *metrics
	view     func() nodeView
	now      func() time.Time
	rebuild  func(j *job) bool
	// codes is the worker's: a code's k is read without parsing it again.
	codes *codec.Cache
	// settle is how long an asked-for full sync first lets gossip settle
	// (2 s; tests shorten it).
	settle time.Duration
	// recheck is how long a full sync waits between noting the differing
	// ranges and listing those that lasted (noteDiffering; 1 s, 0: list
	// every differing range at once).
	recheck time.Duration
	// periodicEntries bounds what a periodic pass lists per peer
	// (periodicEntries, the constant; tests lower it).
	periodicEntries int

	// busy reports whether this server's repair queue holds jobs
	// (periodicDue); nil: never. skippedPasses counts the periodic passes
	// left out in a row (run's goroutine only).
	busy          func() bool
	skippedPasses int

	kickc chan struct{}
	// Full manifest syncs asked for (kick calls), those asked for before
	// the last full sync began, and the full syncs done: the status's
	// Sync counts.
	asked, answered, done atomic.Int64
	// calls counts the manifest and shard calls the per-key rules made
	// to peers during syncs.
	calls atomic.Int64

	mu    sync.Mutex
	stats syncCounters // the range comparisons
	// cursors are, per peer, what the last periodic pass left for the next
	// (peerCursor: where its listing goes on, the ranges it saw differ).
	cursors map[string]*peerCursor
	// inStep holds, per peer, when it last compared its digest with this
	// server's and found them equal (NotePeerInStep).
	inStep map[string]time.Time
}

// noteInStep records that peer found its shared set equal to this
// server's at t.
func (s *syncer) noteInStep(peer string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inStep == nil {
		s.inStep = map[string]time.Time{}
	}
	s.inStep[peer] = t
}

// inStepSince reports whether peer found its shared set equal to this
// server's at or after t.
func (s *syncer) inStepSince(peer string, t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.inStep[peer]
	return ok && !at.Before(t)
}

// busyPasses is how many periodic passes in a row are left out while
// this server's repair queue is busy (syncer.busy). A repair moves
// manifests to new servers all along, so the sets two servers share keep
// changing under the comparison, differences last from one pass to the
// next, and every pass listed its share of ranges: decoding every
// manifest of them on both sides was a quarter to a third of each
// server's CPU during a million-object repair, the repair's own work
// slowed by as much. Writes that miss a server meanwhile are the MRF
// queue's to heal; the periodic pass is the safety net behind it, and
// still runs every busyPasses+1 intervals. Full syncs (a start, a
// return) are never left out.
const busyPasses = 6

// periodicDue reports whether a periodic pass runs at this tick, and
// counts the passes left out.
func (s *syncer) periodicDue() bool {
	if s.busy == nil || !s.busy() || s.skippedPasses >= busyPasses {
		s.skippedPasses = 0
		return true
	}
	s.skippedPasses++
	return false
}

// kick asks for a full sync.
func (s *syncer) kick() {
	s.asked.Add(1)
	select {
	case s.kickc <- struct{}{}:
	default:
	}
}

// run syncs when asked (kick) and every interval until ctx ends.
func (s *syncer) run(ctx context.Context) {
	var tick <-chan time.Time
	if s.interval > 0 {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		tick = t.C
	}
	var win syncWindow
	for {
		var n int
		var err error
		select {
		case <-ctx.Done():
			return
		case <-s.kickc:
			asked := s.asked.Load() // this sync answers these
			// Let gossip settle so the peers we ask are the ones alive now.
			select {
			case <-ctx.Done():
				return
			case <-time.After(s.settle):
			}
			n, err = s.pass(ctx, false, &win)
			s.done.Add(1)
			s.answered.Store(asked)
		case <-tick:
			if !s.periodicDue() {
				continue
			}
			n, err = s.pass(ctx, true, &win)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Error("manifest sync", "err", err)
		}
		if n > 0 {
			s.log.Info("manifest sync: took newer versions from peers", "manifests", n)
		}
	}
}

// pass runs one sync: by range comparison (antientropy.go) when
// the store keeps digests and the client asks for them, else (test fakes)
// by the walk over every local manifest, all of them (a start or a
// return) or, when periodic, those of the next window. Peers that do not
// serve digests (an older binary, during a rolling upgrade) are synced
// the old way, over the local manifests placed on them.
func (s *syncer) pass(ctx context.Context, periodic bool, win *syncWindow) (int, error) {
	rs, ok1 := s.store.(rangeStore)
	rp, ok2 := s.shards.(rangePeers)
	if !ok1 || !ok2 {
		if periodic {
			return s.syncManifests(ctx, win.next(s.now(), s.interval), true)
		}
		return s.syncManifests(ctx, func(*metadata.Manifest) bool { return true }, false)
	}
	var settled int64
	if periodic {
		settled = s.now().Add(-s.interval).UnixNano()
	}
	n, legacy, err := s.syncRanges(ctx, rs, rp, settled)
	if err != nil || len(legacy) == 0 {
		return n, err
	}
	s.log.Info("anti-entropy: peers without digests, syncing their keys by a walk", "nodes", legacy)
	keep := func(m *metadata.Manifest) bool {
		return slices.ContainsFunc(m.Placement, func(id string) bool { return slices.Contains(legacy, id) })
	}
	if periodic {
		sel := win.next(s.now(), s.interval)
		keep = func(m *metadata.Manifest) bool {
			return sel(m) && slices.ContainsFunc(m.Placement, func(id string) bool { return slices.Contains(legacy, id) })
		}
	}
	more, err := s.syncManifests(ctx, keep, periodic)
	return n + more, err
}

// syncWindow hands the periodic sync by walk (stores and peers without
// range digests: see pass) consecutive windows of write times,
// each ending one interval before now, so that every write is checked
// once, only after its PUT has long finished (it never races a write still
// reaching its servers), and none is skipped when a pass runs late. The
// first window reaches back three intervals; writes before it were checked
// by the full sync at start.
type syncWindow struct{ end int64 }

func (sw *syncWindow) next(now time.Time, every time.Duration) func(*metadata.Manifest) bool {
	from, to := sw.end, now.Add(-every).UnixNano()
	if from == 0 {
		from = now.Add(-3 * every).UnixNano()
	}
	sw.end = max(to, from)
	return func(m *metadata.Manifest) bool { return m.Version.TS >= from && m.Version.TS < to }
}

// peerAnswer is what one live placement peer said about a key: its
// current manifest, or nil when it has none.
type peerAnswer struct {
	id   string
	addr string
	cur  *metadata.Manifest
}

// askPeers asks the live placement peers of m for their current manifest
// of m's key, and then the live servers of the placements of newer
// versions they report: a key repaired or overwritten onto other servers
// while this one was away lives mostly there, and its newer version is
// confirmed by counting where it lives (with three servers of m's
// placement lost and rebuilt elsewhere, m's own placement holds only six
// copies of the repaired version, short of a quorum). Peers that do not
// answer are left out.
func (s *syncer) askPeers(ctx context.Context, v nodeView, m *metadata.Manifest) []peerAnswer {
	var out []peerAnswer
	asked := map[string]bool{v.self: true}
	next := m.Placement
	for range syncAskRounds {
		var round []string
		for _, id := range next {
			if !asked[id] {
				asked[id] = true
				round = append(round, id)
			}
		}
		if len(round) == 0 {
			break
		}
		next = nil
		for _, id := range round {
			ni := v.nodes[id]
			if !ni.Live {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			s.manifestCall(ctx)
			cur, err := s.shards.GetManifest(cctx, ni.Addr, m.Bucket, m.Key)
			cancel()
			switch {
			case errors.Is(err, shardrpc.ErrNotFound):
				out = append(out, peerAnswer{id: id, addr: ni.Addr})
			case err == nil:
				out = append(out, peerAnswer{id: id, addr: ni.Addr, cur: cur})
				if m.Version.Less(cur.Version) {
					next = append(next, cur.Placement...)
				}
			}
		}
	}
	return out
}

// syncAskRounds bounds how many placements askPeers follows: a key moved
// by a repair and then overwritten elsewhere is two hops away.
const syncAskRounds = 3

// confirmedNewer returns the newest version of m's key, newer than m, that
// enough servers hold as current to be visible (quorumCache); nil if there
// is none. Taking any newer version a single peer holds would spread a
// write that failed (and that its servers will roll back) over the whole
// placement, and readers would then choose a version whose shards do not
// exist.
func confirmedNewer(m *metadata.Manifest, answers []peerAnswer, quorums *quorumCache) *metadata.Manifest {
	votes := map[metadata.Version]int{}
	seen := map[metadata.Version]*metadata.Manifest{m.Version: m}
	votes[m.Version]++ // this server
	for _, a := range answers {
		if a.cur == nil {
			continue
		}
		votes[a.cur.Version]++
		if _, ok := seen[a.cur.Version]; !ok {
			seen[a.cur.Version] = a.cur
		}
	}
	var best *metadata.Manifest
	for ver, cand := range seen {
		if !m.Version.Less(ver) || votes[ver] < quorums.get(cand) {
			continue
		}
		if best == nil || best.Version.Less(ver) {
			best = cand
		}
	}
	return best
}

// healMissed gives the live placement peers that missed m (they hold no
// manifest of its key, or an older one) the manifest, and queues the
// in-place rebuild of the shards of m they lack. A write made while a
// server was down but not yet known to be (so it was placed there), or
// that failed on one server, leaves the object a shard short although
// every server is live: no scan finds it, and the server's own scrubber
// cannot, since it never got the manifest.
//
// Only a visible m (quorumCache) is handed on, so a failed write is never
// spread; and only the first server of the placement holding m
// does it (unless anyHolder), so the peers get it once. It returns how
// many peers it gave the manifest.
func (s *syncer) healMissed(ctx context.Context, v nodeView, m *metadata.Manifest, answers []peerAnswer, quorums *quorumCache, anyHolder bool) int {
	holders := 1 // this server
	var behind []peerAnswer
	for _, a := range answers {
		switch {
		case a.cur != nil && a.cur.Version == m.Version:
			holders++
		case !slices.Contains(m.Placement, a.id):
			// Asked for a newer version's placement: m is not its to hold.
		case a.cur == nil || a.cur.Version.Less(m.Version):
			behind = append(behind, a)
		}
	}
	if len(behind) == 0 || holders < quorums.get(m) {
		return 0
	}
	for _, id := range m.Placement {
		if id == v.self || anyHolder {
			break
		}
		if slices.ContainsFunc(answers, func(a peerAnswer) bool { return a.id == id && a.cur != nil && a.cur.Version == m.Version }) {
			return 0 // an earlier holder does it
		}
	}
	if len(m.Parts) == 0 {
		// An inline object: the walk left its data out, and a peer must
		// get all of it.
		full, err := s.store.GetManifest(ctx, m.Bucket, m.Key)
		if err != nil || full.Version != m.Version {
			// Replaced meanwhile (its own pass checks the newer
			// version), or unreadable here: give nothing rather than a
			// manifest without its data.
			return 0
		}
		m = full
	}
	var lost []int
	given := 0
	for _, a := range behind {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s.manifestCall(ctx)
		stored, _, err := s.shards.PutManifest(cctx, a.addr, m)
		cancel()
		if err != nil {
			s.log.Warn("manifest sync: give a peer a manifest it missed", "object", m.Bucket+"/"+m.Key, "node", a.id, "err", err)
			continue
		}
		if !stored {
			continue // it got something newer meanwhile
		}
		given++
		idx := slices.Index(m.Placement, a.id)
		for _, p := range m.Parts {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			s.manifestCall(ctx)
			info, err := s.shards.StatShard(cctx, a.addr, p.ID, idx)
			cancel()
			if errors.Is(err, shardrpc.ErrNotFound) || err == nil && info.CRC != p.ShardCRC[idx] {
				lost = append(lost, idx)
				break
			}
		}
	}
	if len(lost) > 0 {
		s.log.Info("manifest sync: rebuilding shards peers missed", "object", m.Bucket+"/"+m.Key, "version", m.Version, "lost", lost)
		s.rebuild(&job{bucket: m.Bucket, key: m.Key, version: m.Version, lost: lost, inPlace: true, prio: len(lost)})
	}
	return given
}

// quorumCache remembers how many holders make a version of each code
// visible: k, as many as a read needs. A version that many servers hold
// may have been returned by a read, so nothing takes it back
// (docs/CONSISTENCY.md) and handing it on is safe; one that fewer hold
// may be a failed write, and is not spread.
type quorumCache struct {
	codes *codec.Cache // nil: parse each code met
	mu    sync.Mutex
	k     map[string]int
}

func newQuorumCache(codes *codec.Cache) *quorumCache {
	return &quorumCache{codes: codes, k: map[string]int{}}
}

func (q *quorumCache) get(m *metadata.Manifest) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	k, ok := q.k[m.Code]
	if !ok {
		k = len(m.Placement)/2 + 1 - 1 // unknown code: a majority
		if c, err := q.codes.Get(m.Code); err == nil {
			k = c.DataShards()
		}
		q.k[m.Code] = k
	}
	return min(k, len(m.Placement))
}

// syncManifests pulls newer versions of the local manifests keep selects
// from their placement peers, and hands peers those they missed; it
// returns how many it stored. With firstOnly (the periodic passes) a
// server looks at a manifest only when no earlier live server of its
// placement holds that version: the one that does checks all its peers,
// the others ask a single peer, not all of them. It walks every local
// manifest: the range comparison (antientropy.go) replaces it wherever
// the store and the peers keep digests.
func (s *syncer) syncManifests(ctx context.Context, keep func(*metadata.Manifest) bool, firstOnly bool) (int, error) {
	v := s.view()
	if v.nodes[v.self].Addr == "" {
		return 0, nil
	}
	var local []*metadata.Manifest
	err := eachManifest(ctx, s.store, func(m *metadata.Manifest) error {
		if keep(m) {
			local = append(local, m)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return s.syncLocal(ctx, v, local, firstOnly), nil
}

// syncLocal runs the per-key rules for each of the local manifests: it
// stores a newer version a quorum of peers holds (confirmedNewer), or
// hands m to the peers that missed it (healMissed). It returns how many
// newer versions it stored. firstOnly: see syncManifests.
func (s *syncer) syncLocal(ctx context.Context, v nodeView, local []*metadata.Manifest, firstOnly bool) int {
	self := v.nodes[v.self]
	if self.Addr == "" {
		return 0
	}
	ctx = countSyncCalls(ctx)
	var g errgroup.Group
	g.SetLimit(16)
	updated := 0
	type upd struct{ m *metadata.Manifest }
	results := make(chan upd, len(local))
	quorums := newQuorumCache(s.codes)
	var healed atomic.Int64
	for _, m := range local {
		g.Go(func() error {
			if firstOnly && !s.firstHolder(ctx, v, m) {
				return nil
			}
			answers := s.askPeers(ctx, v, m)
			if best := confirmedNewer(m, answers, quorums); best != nil {
				results <- upd{best}
			} else {
				healed.Add(int64(s.healMissed(ctx, v, m, answers, quorums, false)))
			}
			return nil
		})
	}
	g.Wait()
	if n := healed.Load(); n > 0 {
		s.log.Info("manifest sync: gave peers manifests they missed", "manifests", n)
	}
	close(results)
	for u := range results {
		s.manifestCall(ctx)
		if _, _, err := s.shards.PutManifest(ctx, self.Addr, u.m); err != nil {
			s.log.Warn("manifest sync: store", "object", u.m.Bucket+"/"+u.m.Key, "err", err)
			continue
		}
		updated++
		if !slices.Contains(u.m.Placement, v.self) {
			s.log.Info("manifest sync: shards rebuilt elsewhere, dropping ours", "object", u.m.Bucket+"/"+u.m.Key, "version", u.m.Version)
		}
	}
	return updated
}

// firstHolder reports whether no live server before this one in m's
// placement holds m's version (or a newer one) as current. A server that
// does not answer counts as not holding it, so a miss is still checked.
func (s *syncer) firstHolder(ctx context.Context, v nodeView, m *metadata.Manifest) bool {
	for _, id := range m.Placement {
		if id == v.self {
			return true
		}
		ni := v.nodes[id]
		if !ni.Live {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s.manifestCall(ctx)
		cur, err := s.shards.GetManifest(cctx, ni.Addr, m.Bucket, m.Key)
		cancel()
		if err == nil && !cur.Version.Less(m.Version) {
			return false
		}
	}
	return true
}

// syncKey stores in the local store the newest version of one key that a
// write quorum of its placement peers hold, if it is newer than the local
// one; it reports whether it stored one. A repair fenced out by a newer
// version (ErrSuperseded) calls it: this server may have missed the switch
// that made its copy stale (other servers saw it dead for a while when it
// was not), and until it learns the newer version it would keep
// coordinating, and failing, the same repair at every scan.
func (s *syncer) syncKey(ctx context.Context, bucket, key string) (bool, error) {
	m, err := s.store.GetManifest(ctx, bucket, key)
	if err != nil {
		return false, err
	}
	v := s.view()
	self := v.nodes[v.self]
	if self.Addr == "" {
		return false, nil
	}
	best := confirmedNewer(m, s.askPeers(ctx, v, m), newQuorumCache(s.codes))
	if best == nil {
		return false, nil
	}
	if _, _, err := s.shards.PutManifest(ctx, self.Addr, best); err != nil {
		return false, err
	}
	s.log.Info("manifest sync: took a newer version a repair was fenced by", "object", bucket+"/"+key, "version", best.Version)
	return true, nil
}
