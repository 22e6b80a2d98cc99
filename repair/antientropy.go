package repair

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Range anti-entropy: how a sync finds the keys to check without walking
// every manifest and asking every peer about each (issue 18: a restart
// over 1,000 objects cost 20-45 s of GetManifest calls on every server).
//
// Each shard server keeps, per peer, range sums of the live manifests
// both should hold (metadata/digest.go). A sync asks every live peer for
// its sums of what it shares with this server (one call), compares them
// with its own, lists the entries of the differing ranges on both sides
// (one call per 256 ranges), and runs the per-key rules (askPeers,
// confirmedNewer, healMissed in worker_sync.go, unchanged) only for its
// own manifests whose version the peer does not hold. What a peer holds
// and this server lacks is that peer's to act on: it finds the same
// difference when it compares with this server, which every server does
// when it sees another come back and at every periodic pass.

// rangeStore is the local store's digest side (*metadata.Store).
type rangeStore interface {
	RangeDigest(peer string) *metadata.RangeSums
	RangeEntries(ctx context.Context, peer string, ranges []int) ([]metadata.RangeEntry, error)
}

// rangePeers asks peers for theirs (*shardrpc.Client).
type rangePeers interface {
	SyncDigest(ctx context.Context, addr, peer string, root metadata.Sum) (sums *metadata.RangeSums, same bool, _ error)
	SyncEntries(ctx context.Context, addr, peer string, ranges []int) ([]metadata.RangeEntry, error)
}

// diffKey is a local manifest a peer does not hold at the same version.
type diffKey struct {
	ref    metadata.ObjectRef
	mine   metadata.Version
	theirs metadata.Version // zero: the peer shares no version of the key
}

// diffEntries returns the entries of mine that theirs lacks at the same
// version (both lists of the same ranges, shared by the same two servers).
func diffEntries(mine, theirs []metadata.RangeEntry) []diffKey {
	held := make(map[metadata.ObjectRef]metadata.Version, len(theirs))
	for _, e := range theirs {
		held[metadata.ObjectRef{Bucket: e.Bucket, Key: e.Key}] = e.Version
	}
	var out []diffKey
	for _, e := range mine {
		ref := metadata.ObjectRef{Bucket: e.Bucket, Key: e.Key}
		if v, ok := held[ref]; !ok || v != e.Version {
			out = append(out, diffKey{ref: ref, mine: e.Version, theirs: v})
		}
	}
	return out
}

// peerDiff is what comparing with one peer found.
type peerDiff struct {
	differing int
	keys      []diffKey
}

// periodicRanges bounds the differing ranges a periodic pass lists per
// peer. Listing a range reads every key in it (a million objects put
// ~180 keys of a server's in each of its ranges for each peer), and while
// repair switches or heavy writes stream through all ranges, most of them
// differ at every comparison however the sums are taken: at a million
// objects the periodic passes were 60% of a shard server's CPU during a
// repair (perf), and slowed the repair itself threefold. The periodic pass
// is a safety net (the write path's quorum and the missed-write queue heal
// writes first, and a return or a start lists what differs twice a second
// apart: noteDiffering), so
// it lists at most this many per peer per pass, going round the ranges
// from pass to pass, and only ranges whose difference lasted (lasting): a
// lasting difference is reached within DigestRanges/periodicRanges+1
// passes at worst (+lastingPasses for a range writes keep changing).
const periodicRanges = 16

// periodicEntries bounds a periodic pass's listing per peer by the keys
// it reads rather than by ranges alone: a range holds a 4,096th of what
// a server holds, so 16 ranges were ~45 keys each at a quarter million
// objects and ~180 at a million, and while a repair streams through
// every range the passes of peers whose queues had drained listed four
// times as much per pass for four times as long (the million's repair
// took 1.87 times as long per group as the quarter million's; peers'
// listings were a fifth of a server's CPU). A pass lists as many ranges
// as fit in this many entries at the density its last listing found
// (peerCursor.limit), at least one and at most periodicRanges, so its
// cost stays the same whatever the server holds; a peer missing many
// writes then takes more passes at a larger server, which is the
// safety net's pace, not the write path's (MRF heals those first).
const periodicEntries = 1024

// pickRanges returns at most limit of ranges (sorted, ascending), the
// first at or after start and on round from there, and the range to
// start from next time; limit 0 takes them all.
func pickRanges(ranges []int, start, limit int) (picked []int, next int) {
	if limit <= 0 || len(ranges) <= limit {
		return ranges, start
	}
	i, _ := slices.BinarySearch(ranges, start)
	for len(picked) < limit {
		picked = append(picked, ranges[i%len(ranges)])
		i++
	}
	slices.Sort(picked)
	return picked, (ranges[(i-1)%len(ranges)] + 1) % metadata.DigestRanges
}

// lastingPasses is how many periodic passes in a row a range must differ
// in before a pass lists it although it changed between them (lasting).
const lastingPasses = 3

// rangeSeen is a range a periodic comparison found differing: both sides'
// sums then, and in how many passes in a row it differed.
type rangeSeen struct {
	ours, theirs metadata.Sum
	passes       int
}

// lasting returns the ranges of differing (ours against theirs) that a
// periodic pass lists, and what it leaves for the next pass to compare
// with. A range is listed when the previous pass (prev) saw it differ with
// the same sums on both sides, so nothing reached it for a whole interval
// and the difference is a real one, or when it differed in lastingPasses
// passes in a row, so that a hot range whose sums never hold still is
// reached too.
//
// Why: under a stream of writes (a fill, a repair's switches) most
// comparisons catch writes that have reached one server of a pair and not
// yet the other, and listing such a range reads every key in it on both
// sides to find nothing (a million-object fill: ~1,000 listings for 59
// keys to heal, a third of a shard server's CPU). A write in flight
// changes the sums of its range by the next pass; a missed write does not.
func lasting(prev map[int]rangeSeen, ours, theirs *metadata.RangeSums, differing []int) (list []int, seen map[int]rangeSeen) {
	seen = make(map[int]rangeSeen, len(differing))
	for _, r := range differing {
		now := rangeSeen{ours: ours[r], theirs: theirs[r], passes: 1}
		if p, ok := prev[r]; ok {
			now.passes = p.passes + 1
			if p.ours == now.ours && p.theirs == now.theirs || now.passes >= lastingPasses {
				list = append(list, r)
			}
		}
		seen[r] = now
	}
	return list, seen
}

// peerCursor is a periodic pass's memory of one peer: where its listing
// goes on from (pickRanges) and the ranges it found differing (lasting).
type peerCursor struct {
	next int
	seen map[int]rangeSeen
	// perRange is how many entries a range listed with this peer held
	// last time, on average over both sides (0: none listed yet).
	perRange float64
}

// limit is how many ranges a periodic pass lists with the peer:
// entries at the density of the last listing, within [1,
// periodicRanges] (entries 0: periodicRanges).
func (c *peerCursor) limit(entries int) int {
	if c.perRange <= 0 || entries <= 0 {
		return periodicRanges
	}
	return int(max(1, min(periodicRanges, float64(entries)/c.perRange)))
}

// inStep returns c for a peer found in step: nothing seen differing, the
// same place to go on from and what c learnt of the ranges' density.
func (c *peerCursor) inStep() *peerCursor {
	return &peerCursor{next: c.next, perRange: c.perRange}
}

// comparePeer compares this server's sums for peer id with id's sums for
// this server, and lists the differing ranges on both sides: all of them
// when cur is nil; otherwise those that last (lasting, against what cur
// saw), at most limit of them (0: no bound), going round from cur.next,
// and it returns the cursor for the next comparison.
func comparePeer(ctx context.Context, rs rangeStore, rp rangePeers, self, id, addr string, cur *peerCursor, limit int) (peerDiff, *peerCursor, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	before := rs.RangeDigest(id)
	theirs, same, err := rp.SyncDigest(cctx, addr, self, before.Root())
	if err != nil || same {
		if cur != nil && err == nil {
			cur = cur.inStep()
		}
		return peerDiff{}, cur, err
	}
	// NB: the peer's sums are taken some time after ours (its queue, the
	// network): writes that reached both servers in between make a range
	// differ that is in step. Under a steady stream of writes that was
	// most ranges at every comparison, and listing each such range reads
	// all its keys: work that grew with the objects held, not with the
	// differences (a million-object fill slowed threefold). So a range
	// counts only if the peer's sum differs from ours both before and
	// after its answer. That hides no difference that lasts: a range
	// equal to either of our snapshots was in step at that moment, and
	// whatever diverges later is seen by a later comparison.
	ranges := metadata.DiffRanges(before, theirs)
	after := before
	if len(ranges) > 0 {
		after = rs.RangeDigest(id)
		ranges = slices.DeleteFunc(ranges, func(r int) bool { return after[r] == theirs[r] })
	}
	differing := len(ranges)
	if cur != nil {
		var seen map[int]rangeSeen
		ranges, seen = lasting(cur.seen, after, theirs, ranges)
		var next int
		ranges, next = pickRanges(ranges, cur.next, limit)
		cur = &peerCursor{next: next, seen: seen, perRange: cur.perRange}
	}
	if len(ranges) == 0 {
		return peerDiff{differing: differing}, cur, nil
	}
	remote, err := rp.SyncEntries(cctx, addr, self, ranges)
	if err != nil {
		return peerDiff{}, cur, err
	}
	local, err := rs.RangeEntries(cctx, id, ranges)
	if err != nil {
		return peerDiff{}, cur, err
	}
	if cur != nil {
		cur.perRange = float64(len(local)+len(remote)) / float64(2*len(ranges))
	}
	return peerDiff{differing: differing, keys: diffEntries(local, remote)}, cur, nil
}

// syncRanges is a sync by range comparison with every live peer. With
// settled set (the periodic passes), keys whose version on either side is
// newer than settled are left for a later pass, so that it never races a
// write still reaching its servers. It returns how many newer versions it
// stored here, and the live peers that do not serve digests (an older
// binary), whose shared keys it could not compare.
func (s *syncer) syncRanges(ctx context.Context, rs rangeStore, rp rangePeers, settled int64) (int, []string, error) {
	t0 := s.now()
	v := s.view()
	self := v.nodes[v.self]
	if self.Addr == "" {
		return 0, nil, nil
	}
	var mu sync.Mutex
	keys := map[metadata.ObjectRef]bool{}
	var legacy []string
	full := settled == 0
	var noted map[string]*peerCursor
	if full && s.recheck > 0 {
		if noted = s.noteDiffering(ctx, rs, rp, v); len(noted) > 0 {
			select {
			case <-ctx.Done():
				return 0, nil, ctx.Err()
			case <-time.After(s.recheck):
			}
		}
	}
	var g errgroup.Group
	g.SetLimit(4)
	for id, ni := range v.nodes {
		if id == v.self || !ni.Live || ni.Addr == "" {
			continue
		}
		cur, limit := noted[id], 0 // a full sync: what lasted since noteDiffering, or every differing range
		if cur != nil && len(cur.seen) == 0 {
			// In step when noted: what differs now came later, for the
			// periodic passes.
			s.notePeerSync(id, shardrpc.PeerSync{Compared: metadata.DigestRanges, At: s.now().UTC().Format(time.RFC3339Nano)})
			continue
		}
		if !full && s.inStepSince(id, t0.Add(-s.interval)) {
			// NB: the peer compared with us within the interval and found
			// us in step (NotePeerInStep): its answer stands for ours.
			s.mu.Lock()
			if c := s.cursors[id]; c != nil {
				s.cursors[id] = c.inStep()
			}
			s.mu.Unlock()
			s.notePeerSync(id, shardrpc.PeerSync{Compared: metadata.DigestRanges, At: s.now().UTC().Format(time.RFC3339Nano)})
			continue
		}
		if !full {
			s.mu.Lock()
			cur = s.cursors[id]
			s.mu.Unlock()
			if cur == nil {
				cur = &peerCursor{}
			}
			limit = cur.limit(s.periodicEntries)
		}
		g.Go(func() error {
			p0 := s.now()
			d, next, err := comparePeer(ctx, rs, rp, v.self, id, ni.Addr, cur, limit)
			ps := shardrpc.PeerSync{Compared: metadata.DigestRanges, Differing: int64(d.differing), Keys: int64(len(d.keys)),
				Seconds: s.now().Sub(p0).Seconds(), At: s.now().UTC().Format(time.RFC3339Nano)}
			if err != nil {
				ps = shardrpc.PeerSync{Err: err.Error(), At: ps.At, Seconds: ps.Seconds}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if isNoRoute(err) {
					legacy = append(legacy, id)
				} else if ctx.Err() == nil {
					s.log.Warn("anti-entropy: compare with a peer", "node", id, "err", err)
				}
			}
			for _, k := range d.keys {
				if settled == 0 || k.mine.TS < settled && k.theirs.TS < settled {
					keys[k.ref] = true
				}
			}
			s.notePeerSync(id, ps)
			if !full && next != nil {
				s.mu.Lock()
				if s.cursors == nil {
					s.cursors = map[string]*peerCursor{}
				}
				s.cursors[id] = next
				s.mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	if ctx.Err() != nil {
		return 0, legacy, ctx.Err()
	}
	refs := slices.SortedFunc(maps.Keys(keys), func(a, b metadata.ObjectRef) int {
		if a.Bucket != b.Bucket {
			return strings.Compare(a.Bucket, b.Bucket)
		}
		return strings.Compare(a.Key, b.Key)
	})
	n := s.syncKeys(ctx, v, refs)
	s.m.syncKeys.Add(float64(len(refs)))
	s.mu.Lock()
	s.stats.KeysSynced += int64(len(refs))
	s.stats.LastSeconds = s.now().Sub(t0).Seconds()
	s.mu.Unlock()
	s.m.syncSeconds.Set(s.now().Sub(t0).Seconds())
	return n, legacy, nil
}

// noteDiffering compares this server's sums with every live peer's and
// notes the ranges that differ, listing none: the first half of a full
// sync, whose second comparison, recheck later, lists only the ranges
// that differed in both with the same sums (lasting). A full sync runs
// when a server starts or sees another return, which under load (a
// repair's stream of switches, a fill) is often: gossip calls a busy
// server suspect and then alive again. Listing every differing range then
// read every key of most ranges, on both sides, for writes still in
// flight (a million-object repair: a quarter of the cluster's CPU in
// range listings). What a returned server missed does not change between
// the two comparisons, unless a new write reaches its range meanwhile;
// the periodic passes find those. A peer in step at the first comparison
// is not compared again; one it could not compare with has no cursor, and
// the full sync lists all its differing ranges.
func (s *syncer) noteDiffering(ctx context.Context, rs rangeStore, rp rangePeers, v nodeView) map[string]*peerCursor {
	var mu sync.Mutex
	noted := map[string]*peerCursor{}
	var g errgroup.Group
	g.SetLimit(4)
	for id, ni := range v.nodes {
		if id == v.self || !ni.Live || ni.Addr == "" {
			continue
		}
		g.Go(func() error {
			_, cur, err := comparePeer(ctx, rs, rp, v.self, id, ni.Addr, &peerCursor{}, 0)
			if err == nil {
				mu.Lock()
				noted[id] = cur
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	return noted
}

// syncKeys runs the per-key rules for the local manifests of refs: it
// stores the confirmed newer versions peers hold and hands peers those
// they missed. It returns how many it stored.
func (s *syncer) syncKeys(ctx context.Context, v nodeView, refs []metadata.ObjectRef) int {
	var local []*metadata.Manifest
	for _, r := range refs {
		m, err := s.store.GetManifest(ctx, r.Bucket, r.Key)
		if err != nil || m.Deleted || len(m.Placement) == 0 {
			continue // gone or deleted since: as the full walk, tombstones are the peers' to pull
		}
		local = append(local, m)
	}
	return s.syncLocal(ctx, v, local, false)
}

// notePeerSync records the last comparison with peer id.
func (s *syncer) notePeerSync(id string, ps shardrpc.PeerSync) {
	s.m.syncRanges.Add(float64(ps.Compared))
	s.m.syncDiffering.Add(float64(ps.Differing))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.RangesCompared += ps.Compared
	s.stats.RangesDiffering += ps.Differing
	if s.stats.Peers == nil {
		s.stats.Peers = map[string]shardrpc.PeerSync{}
	}
	s.stats.Peers[id] = ps
}

// syncCallsKey marks a context of the sync's per-key rules, whose calls
// to peers the status counts (MRF runs the same rules, not counted).
type syncCallsKey struct{}

func countSyncCalls(ctx context.Context) context.Context {
	return context.WithValue(ctx, syncCallsKey{}, true)
}

// manifestCall counts one manifest or shard call the per-key rules make
// to a peer, when a sync makes it.
func (s *syncer) manifestCall(ctx context.Context) {
	if ctx.Value(syncCallsKey{}) == nil {
		return
	}
	s.calls.Add(1)
	s.m.syncCalls.Inc()
}

// isNoRoute reports whether err is a peer's answer that it has no such
// endpoint.
func isNoRoute(err error) bool {
	var re *shardrpc.RemoteError
	return errors.As(err, &re) && re.Code == shardrpc.CodeNoRoute
}

// syncCounters are the anti-entropy counts of the status (guarded by
// syncer.mu).
type syncCounters struct {
	RangesCompared, RangesDiffering, KeysSynced int64
	LastSeconds                                 float64
	Peers                                       map[string]shardrpc.PeerSync
}

// status returns the sync counts.
func (s *syncer) status() shardrpc.SyncCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := shardrpc.SyncCounts{Full: s.done.Load(), Pending: s.asked.Load() > s.answered.Load(),
		RangesCompared: s.stats.RangesCompared, RangesDiffering: s.stats.RangesDiffering,
		KeysSynced: s.stats.KeysSynced, ManifestCalls: s.calls.Load(), LastSeconds: s.stats.LastSeconds}
	if len(s.stats.Peers) > 0 {
		st.Peers = maps.Clone(s.stats.Peers)
	}
	return st
}
