package shardserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Tombstone collection.
//
// A DELETE leaves a tombstone on the servers of the deleted version's
// placement. It is needed while some server may still hold an older
// version of the key, or a write of one may still arrive: the tombstone is
// newer, so readers, listings, anti-entropy and the servers themselves
// (which refuse an older write) let it win. Once neither can happen it
// only costs space and walks, and it is collected here. The argument is in
// docs/CONSISTENCY.md, "Tombstone collection"; in short:
//
//   - Only a null tombstone (metadata.Collectable) with nothing under it
//     is collected: a versioned bucket's delete marker is a version users
//     see, and a tombstone with versions under it keeps them.
//   - Not before Config.TombstoneGrace has passed since this server
//     stored it, which outlasts every write attempt (client, repair
//     switch, anti-entropy hand-over) that could still carry an older
//     version of the key: after it, such a version can only come from a
//     server that holds one.
//   - Only when every shard server this one knows, dead ones included,
//     has answered, and each holds the tombstone (current, nothing under
//     it) or nothing at all. A server that is down, slow or unknown to the
//     peers map blocks collection, never a quorum: a server that missed
//     the DELETE may still hold the old version, and after collection
//     nothing would outvote it. A server that holds an older version is
//     handed the tombstone (when it is visible, as the manifest sync hands
//     on a visible version) and its confirm job then drops what is under
//     it; the next round finds it ready.
//   - Removal is by exact version and only while the tombstone is current
//     with nothing under it (metadata.Store.RemoveTombstone), on the other
//     holders first and here last, so a failed removal leaves this
//     server's job (and tombstone) to try again.
//
// Every holder queues a job when it stores a tombstone. The first server
// of the placement runs its job after the grace; the others after twice
// the grace, and find the key gone (one local read) unless the first
// server could not do it. Work is proportional to deletes: each round
// asks each known server once per bucket for up to shardrpc.MaxBatch
// tombstones.

// tombstoneAPI is what tombstone collection needs from peers;
// *shardrpc.Client implements it.
type tombstoneAPI interface {
	GetManifestVersionsBatch(ctx context.Context, addr, bucket string, keys []string) ([]shardrpc.KeyVersions, error)
	RemoveTombstones(ctx context.Context, addr, bucket string, refs []shardrpc.TombstoneRef) ([]bool, error)
	PutManifest(ctx context.Context, addr string, m *metadata.Manifest) (bool, metadata.Version, error)
}

// tombCallTimeout bounds one peer's answer in a collection round.
const tombCallTimeout = 30 * time.Second

// tombVerdict is what one check of a tombstone found.
type tombVerdict int

const (
	tombCollect    tombVerdict = iota // every server holds it or nothing: remove it
	tombWait                          // a server holds an older version (or one under the tombstone): later
	tombBlocked                       // a server did not answer: later
	tombSuperseded                    // a newer version exists: nothing to collect
)

func (v tombVerdict) String() string {
	return [...]string{"collected", "waiting", "blocked", "superseded"}[v]
}

// tombAnswer is one server's answer about one key: its versions, or
// failed when it gave none.
type tombAnswer struct {
	id     string
	cur    *metadata.Manifest
	prev   []*metadata.Manifest
	failed bool
}

// judgeTombstone is the pure core of a check: t is the tombstone, answers
// what every other known server said (this server holds t current with
// nothing under it). holders are the servers that hold t as current (to
// remove it from, when the verdict is tombCollect); behind those that
// hold an older version as current, so lack t.
func judgeTombstone(t *metadata.Manifest, answers []tombAnswer) (v tombVerdict, holders, behind []string) {
	v = tombCollect
	worse := func(w tombVerdict) {
		// NB: superseded decides the job; blocked outranks waiting only
		// for the metrics.
		if w > v {
			v = w
		}
	}
	for _, a := range answers {
		switch {
		case a.failed:
			worse(tombBlocked)
		case a.cur == nil:
			// Holds nothing of the key.
		case t.Version.Less(a.cur.Version):
			worse(tombSuperseded)
		case a.cur.Version == t.Version:
			holders = append(holders, a.id)
			if len(a.prev) > 0 {
				// Older versions under it: its confirm job drops them
				// once the tombstone is confirmed.
				worse(tombWait)
			}
		default:
			// It missed the delete: an older version is current there
			// (previous versions are older still).
			worse(tombWait)
			behind = append(behind, a.id)
		}
	}
	return v, holders, behind
}

// enqueueTombstone queues the collection check of tombstone t, stored
// here now.
func (s *Server) enqueueTombstone(ctx context.Context, t *metadata.Manifest) {
	if err := s.meta.EnqueueTombstone(ctx, *s.tombstoneJob(t)); err != nil {
		// The tombstone then stays, which is the safe side.
		s.log.Error("enqueue tombstone check", "bucket", t.Bucket, "key", t.Key, "err", err)
	}
}

// tombstoneJob is the collection check of tombstone t: due after the
// grace on the first server of its placement, twice that on the others.
func (s *Server) tombstoneJob(t *metadata.Manifest) *metadata.TombstoneJob {
	delay := s.cfg.TombstoneGrace
	if len(t.Placement) == 0 || t.Placement[0] != s.cfg.NodeID {
		// NB: the first server of the placement collects; the others
		// only if it could not (it died, or never stored the tombstone).
		delay *= 2
	}
	return &metadata.TombstoneJob{Bucket: t.Bucket, Key: t.Key, Version: t.Version, Due: s.now().Add(delay)}
}

// tombRetry is how long a tombstone check that could not decide waits:
// backing off from a quarter of the grace (at least a second, at most
// ConfirmRetry) to eight graces or ten minutes, whichever is less, so
// that a key blocked by a server that stays down costs little. A job is
// never dropped for waiting: the tombstone then stays, and the check is
// one batched question per server.
func (s *Server) tombRetry(attempts int) time.Duration {
	base := min(s.cfg.ConfirmRetry, max(s.cfg.TombstoneGrace/4, time.Second))
	ceil := max(base, min(10*time.Minute, 8*s.cfg.TombstoneGrace))
	return min(base<<min(attempts, 16), ceil)
}

// runTombstones runs the tombstone checks that are due and returns how
// many tombstones it collected.
func (s *Server) runTombstones(ctx context.Context) (int, error) {
	if s.cfg.Members == nil {
		return 0, nil // nobody to ask: nothing can be proven
	}
	// NB: a process that just started knows only the servers gossip has
	// shown it so far, and one it has not heard of yet would not be
	// asked: until Config.TombstoneSettle has passed it only ends the
	// jobs it can decide alone (the key gone or moved on here).
	settled := s.runStart.Add(s.cfg.TombstoneSettle)
	settling := !s.runStart.IsZero() && s.now().Before(settled)
	collected := 0
	for {
		jobs, err := s.meta.DueTombstones(ctx, s.now(), shardrpc.MaxBatch)
		if err != nil || len(jobs) == 0 {
			return collected, err
		}
		var done, next []metadata.TombstoneJob
		retry := func(j metadata.TombstoneJob) {
			n := j
			n.Attempts++
			n.Due = s.now().Add(s.tombRetry(j.Attempts))
			done, next = append(done, j), append(next, n)
		}
		byBucket := map[string][]*metadata.Manifest{}
		jobOf := map[string]metadata.TombstoneJob{}
		for _, j := range jobs {
			cur, prev, err := s.meta.Versions(ctx, j.Bucket, j.Key)
			switch {
			case errors.Is(err, metadata.ErrNotFound):
				done = append(done, j) // collected (here or by another holder)
			case err != nil:
				return collected, err
			case cur.Version != j.Version || !metadata.Collectable(cur):
				done = append(done, j) // the key moved on
			case slices.ContainsFunc(prev, func(p *metadata.Manifest) bool { return p.VersionID != "" }):
				// A suspended bucket's null delete over versions: they
				// stay, and so does the tombstone.
				s.m.tombstones.WithLabelValues("kept").Inc()
				done = append(done, j)
			case len(prev) > 0:
				retry(j) // replaced versions await their confirm job
				s.m.tombstones.WithLabelValues(tombWait.String()).Inc()
			case settling:
				n := j
				n.Due = settled
				done, next = append(done, j), append(next, n)
			default:
				ref := j.Bucket + "\x00" + j.Key
				if _, dup := jobOf[ref]; dup {
					done = append(done, j) // queued twice: one check is enough
					continue
				}
				byBucket[j.Bucket] = append(byBucket[j.Bucket], cur)
				jobOf[ref] = j
			}
		}
		for bucket, ts := range byBucket {
			for t, v := range s.checkTombstones(ctx, bucket, ts) {
				j := jobOf[bucket+"\x00"+t.Key]
				s.m.tombstones.WithLabelValues(v.String()).Inc()
				if v == tombBlocked {
					s.tombBlocked.Add(1)
				}
				switch v {
				case tombCollect:
					collected++
					done = append(done, j)
				case tombSuperseded:
					done = append(done, j)
				default:
					retry(j)
				}
			}
		}
		if err := s.meta.DoneTombstones(ctx, done, next); err != nil {
			return collected, err
		}
	}
}

// checkTombstones checks the tombstones ts of bucket (each current here
// with nothing under it) with every known server, hands a visible
// tombstone to servers that missed it, and removes those every server
// allows: from the other holders first, here last. It returns each
// tombstone's verdict (tombCollect only once removed here).
func (s *Server) checkTombstones(ctx context.Context, bucket string, ts []*metadata.Manifest) map[*metadata.Manifest]tombVerdict {
	keys := make([]string, len(ts))
	for i, t := range ts {
		keys[i] = t.Key
	}
	answers := make([][]tombAnswer, len(ts)) // per tombstone
	addrs := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	members := s.cfg.Members()
	if len(members) == 0 {
		// NB: no view of the cluster yet (gossip not started) proves
		// nothing; an empty answer must not read as "nobody holds it".
		out := make(map[*metadata.Manifest]tombVerdict, len(ts))
		for _, t := range ts {
			out[t] = tombBlocked
		}
		return out
	}
	for _, id := range members {
		if id == s.cfg.NodeID {
			continue
		}
		addr, ok := "", false
		if s.cfg.Peers != nil {
			addr, ok = s.cfg.Peers(id)
		}
		if !ok {
			// NB: under mu: the calls to the servers before this one
			// are already appending their answers.
			mu.Lock()
			for i := range ts {
				answers[i] = append(answers[i], tombAnswer{id: id, failed: true})
			}
			mu.Unlock()
			continue
		}
		addrs[id] = addr
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, tombCallTimeout)
			defer cancel()
			kv, err := s.tpeers.GetManifestVersionsBatch(cctx, addr, bucket, keys)
			mu.Lock()
			defer mu.Unlock()
			for i := range ts {
				a := tombAnswer{id: id, failed: err != nil}
				if err == nil {
					a.cur, a.prev, a.failed = kv[i].Current, kv[i].Previous, kv[i].Err != ""
				}
				answers[i] = append(answers[i], a)
			}
			if err != nil {
				s.log.Debug("tombstones: peer did not answer", "node", id, "err", err)
			}
		})
	}
	wg.Wait()

	out := make(map[*metadata.Manifest]tombVerdict, len(ts))
	remove := map[string][]int{} // server -> indexes of ts it must remove
	for i, t := range ts {
		v, holders, behind := judgeTombstone(t, answers[i])
		out[t] = v
		switch v {
		case tombCollect:
			for _, id := range holders {
				remove[id] = append(remove[id], i)
			}
		case tombWait:
			if len(behind) > 0 && len(holders)+1 >= s.visible(t) {
				s.handTombstone(ctx, t, behind, addrs)
			}
		}
	}

	failed := make([]bool, len(ts))
	for id, idx := range remove {
		refs := make([]shardrpc.TombstoneRef, len(idx))
		for n, i := range idx {
			refs[n] = shardrpc.TombstoneRef{Key: ts[i].Key, Version: ts[i].Version}
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, tombCallTimeout)
			defer cancel()
			_, err := s.tpeers.RemoveTombstones(cctx, addrs[id], bucket, refs)
			if err == nil {
				return
			}
			s.log.Warn("tombstones: removal failed; trying again later", "node", id, "tombstones", len(refs), "err", err)
			mu.Lock()
			defer mu.Unlock()
			for _, i := range idx {
				failed[i] = true
			}
		})
	}
	wg.Wait()
	var here []metadata.TombstoneRef
	var hereOf []*metadata.Manifest
	for i, t := range ts {
		if out[t] != tombCollect {
			continue
		}
		if failed[i] {
			out[t] = tombBlocked
			continue
		}
		here = append(here, metadata.TombstoneRef{Key: t.Key, Version: t.Version})
		hereOf = append(hereOf, t)
	}
	if len(here) == 0 {
		return out
	}
	// NB: a holder that removed nothing had something else by then (a
	// newer write): nothing to do there. Here, the same holds. One sync
	// for the lot.
	removed, err := s.meta.RemoveTombstones(ctx, bucket, here)
	for n, t := range hereOf {
		switch {
		case err != nil:
			out[t] = tombBlocked
		case !removed[n]:
			// Something arrived meanwhile: the next run looks again.
			out[t] = tombWait
		}
	}
	if err != nil {
		s.log.Error("tombstones: remove here", "bucket", bucket, "tombstones", len(here), "err", err)
	}
	return out
}

// handTombstone gives tombstone t, visible (held by enough servers that a
// read may have returned it), to the servers behind that missed it, as
// the manifest sync hands on a visible version. Their confirm jobs then
// drop the older versions under it, and a later check finds them ready.
func (s *Server) handTombstone(ctx context.Context, t *metadata.Manifest, behind []string, addrs map[string]string) {
	for _, id := range behind {
		cctx, cancel := context.WithTimeout(ctx, tombCallTimeout)
		_, _, err := s.tpeers.PutManifest(cctx, addrs[id], t)
		cancel()
		if err != nil {
			s.log.Warn("tombstones: give a server the tombstone it missed", "node", id, "bucket", t.Bucket, "key", t.Key, "err", err)
			continue
		}
		s.log.Info("tombstones: gave a server the tombstone it missed", "node", id, "bucket", t.Bucket, "key", t.Key, "version", t.Version.String())
	}
}

// removeTombstones serves PathTombstonesRemove.
func (s *Server) removeTombstones(w http.ResponseWriter, r *http.Request) {
	var req shardrpc.RemoveTombstonesRequest
	if err := s.decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Bucket == "" || len(req.Tombstones) > shardrpc.MaxBatch {
		s.fail(w, r, fmt.Errorf("%w: a bucket and at most %d tombstones", shardrpc.ErrBadRequest, shardrpc.MaxBatch))
		return
	}
	refs := make([]metadata.TombstoneRef, len(req.Tombstones))
	for i, ref := range req.Tombstones {
		refs[i] = metadata.TombstoneRef{Key: ref.Key, Version: ref.Version}
	}
	// NB: one sync for the batch, not one per tombstone.
	removed, err := s.meta.RemoveTombstones(r.Context(), req.Bucket, refs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shardrpc.WriteJSON(w, http.StatusOK, shardrpc.RemoveTombstonesResponse{Removed: removed})
}
