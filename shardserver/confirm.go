package shardserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Confirmation.
//
// A manifest write that replaces a version is not known to have succeeded:
// the gateway acknowledges a PUT only once a write quorum (k+1 of the
// placement) stored it, and a write that failed part-way leaves the new
// version on a few servers only. If those dropped the version it replaced,
// an acknowledged object could fall below k copies. So the store keeps the
// replaced version (metadata.Store.Versions), readers count it as a vote,
// and a confirm job decides its fate after GCDelay by asking which versions
// the servers hold: first the current manifest's placement, then the
// placements of any newer versions they report (a repair switch or an
// overwrite made while this server was away can have moved the key to
// servers this one would not otherwise ask):
//
//   - confirmed: the current version, or a newer one, is visible: held
//     (current or previous) by at least k servers, so a gateway may have
//     returned it and nothing may take it back (docs/CONSISTENCY.md). It
//     is the key's version from now on: the previous versions are dropped
//     and their shard files collected.
//   - failed: the current version is older than RollbackAfter here, no
//     newer version exists anywhere asked, and even counting every server
//     that did not answer as a holder it is held by fewer than k, so no
//     gateway can have acknowledged it (k+1) or returned it (k). It is
//     rolled back: the newest previous version is current again, and the
//     failed version's shard files are collected.
//   - otherwise the job asks again after ConfirmRetry.
//
// A newer version seen anywhere, confirmed or not, rules a rollback out:
// the current version was replaced, not failed. The servers that hold the
// newer version may well have held this one and dropped it once the newer
// was confirmed, so its own holders are no longer a count of where it got
// to (a server back after the repair grace finds its acknowledged version
// on 1 to 3 servers, the repaired copy on the others). Rolling back would
// restore an older version than one that was acknowledged. The job waits
// instead; the manifest sync brings the newer version here, which ends it.
//
// Holders are counted by the exact version, never by "holds something
// newer": a server whose current is a newer failed write may not hold the
// version in question at all, and counting it could drop the last copies
// of the acknowledged version.

// versionAsker is what confirm jobs need from peers; *shardrpc.Client
// implements it.
type versionAsker interface {
	GetManifestVersions(ctx context.Context, addr, bucket, key string) (*metadata.Manifest, []*metadata.Manifest, error)
}

// confirmCallTimeout bounds one peer's answer; a slower peer counts as
// unreachable this round.
const confirmCallTimeout = 10 * time.Second

// tally is what the placement servers said about a key.
type tally struct {
	holders     map[metadata.Version]int // servers holding each version, current or previous
	manifests   map[metadata.Version]*metadata.Manifest
	unreachable int // servers that did not answer (dead, unknown, errors)
}

func (t *tally) add(cur *metadata.Manifest, prev []*metadata.Manifest) {
	for _, m := range append([]*metadata.Manifest{cur}, prev...) {
		if m == nil {
			continue
		}
		t.holders[m.Version]++
		if t.manifests[m.Version] == nil {
			t.manifests[m.Version] = m
		}
	}
}

// seenFn is what DropPrevious may drop for (metadata.Store.DropPrevious's
// seen): a manifest m such that a manifest of m's version ID at least as
// new as m is visible in t (or is cur, noted: a gateway said it is on a
// write quorum). A manifest goes only for a newer one of its version ID
// that is visible: a noncurrent repair switch stored on fewer than k
// servers must not take the manifest it rewrote from them
// (docs/VERSIONING.md, "What the confirm job keeps"), while a version
// moved and repaired elsewhere (seen visible there) still replaces the
// ones below it here.
func (t *tally) seenFn(cur *metadata.Manifest, noted bool, visible func(*metadata.Manifest) int) func(*metadata.Manifest) bool {
	return func(m *metadata.Manifest) bool {
		if noted && m.Version == cur.Version {
			return true
		}
		for v, o := range t.manifests {
			if o.VersionID == m.VersionID && !v.Less(m.Version) && t.holders[v] >= visible(o) {
				return true
			}
		}
		return false
	}
}

// verdict is what a confirm job does.
type verdict int

const (
	verdictRetry    verdict = iota // ask again later
	verdictConfirm                 // drop previous versions, collect their shards
	verdictRollBack                // undo the current version, collect its shards
)

// decide is the pure core of a confirm job: cur is this server's current
// manifest, t what the servers said (cur's placement and the placements
// of the newer versions they reported), age how long cur has been current
// here, visible how many holders make a version of a manifest visible.
func decide(cur *metadata.Manifest, t tally, age, rollbackAfter time.Duration, visible func(*metadata.Manifest) int) verdict {
	replaced := false
	for v, m := range t.manifests {
		if !v.Less(cur.Version) && t.holders[v] >= visible(m) {
			return verdictConfirm
		}
		replaced = replaced || cur.Version.Less(v)
	}
	if replaced {
		return verdictRetry
	}
	if age >= rollbackAfter && t.holders[cur.Version]+t.unreachable < visible(cur) {
		return verdictRollBack
	}
	return verdictRetry
}

// visible is how many servers make a version of m visible: k of its code
// (as many as a read needs, as the gateway counts), capped at its
// placement; a majority when the code is unknown.
func (s *Server) visible(m *metadata.Manifest) int {
	n := len(m.Placement)
	if n == 0 {
		return 1
	}
	if c, err := s.code(m.Code); err == nil {
		return min(c.DataShards(), n)
	}
	return n/2 + 1
}

func (s *Server) code(name string) (codec.Code, error) { return s.codes.Get(name) }

// enqueueConfirm queues a confirm job for the current version of a key,
// due after GCDelay. A failure is logged: the previous versions then stay
// until the key's next write queues another job, which is the safe side.
func (s *Server) enqueueConfirm(ctx context.Context, cur *metadata.Manifest) {
	j := s.confirmJob(cur, s.cfg.GCDelay)
	if err := s.meta.EnqueueConfirm(ctx, *j); err != nil {
		s.log.Error("enqueue confirm", "bucket", cur.Bucket, "key", cur.Key, "err", err)
		return
	}
	if s.cfg.GCDelay <= 0 {
		s.wakeConfirms()
	}
}

// confirmJob is the confirm job for the current version cur of a key,
// due after delay.
func (s *Server) confirmJob(cur *metadata.Manifest, delay time.Duration) *metadata.ConfirmJob {
	now := s.now()
	return &metadata.ConfirmJob{Bucket: cur.Bucket, Key: cur.Key, Version: cur.Version, Since: now, Due: now.Add(delay)}
}

// wakeConfirms runs the confirm queue soon, for a job queued due now.
func (s *Server) wakeConfirms() {
	select {
	case s.confirmNow <- struct{}{}:
	default: // a run is already due; it takes this job too
	}
}

// runConfirms runs the confirm jobs that are due. It returns how many it
// finished (confirmed, rolled back or found moot).
//
// A round's jobs end together: their removals and retries go in one
// synced batch (metadata.Store.DoneConfirms), which also makes their
// unsynced drops of previous versions durable, so a round of 64 jobs
// costs one sync rather than two per job.
func (s *Server) runConfirms(ctx context.Context) (int, error) {
	finished := 0
	for {
		jobs, err := s.meta.DueConfirms(ctx, s.now(), 64)
		if err != nil || len(jobs) == 0 {
			return finished, err
		}
		var mu sync.Mutex
		var done, next []metadata.ConfirmJob
		var g errgroup.Group
		g.SetLimit(16)
		for _, j := range jobs {
			g.Go(func() error {
				ok, err := s.confirm(ctx, j)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				done = append(done, j)
				if ok {
					finished++
					return nil
				}
				// NB: the retry is queued in the batch that removes the
				// job, so a crash repeats a job rather than losing it.
				n := j
				n.Due = s.now().Add(s.retryDelay())
				next = append(next, n)
				return nil
			})
		}
		werr := g.Wait()
		// NB: the jobs that ended are recorded even when another failed:
		// their drops are made, and a repeat would only re-read them.
		if err := s.meta.DoneConfirms(ctx, done, next); err != nil {
			return finished, err
		}
		if werr != nil {
			return finished, werr
		}
	}
}

// retryDelay is ConfirmRetry, but short enough that a rollback is not
// late by much more than RollbackAfter (which dev and tests set low).
func (s *Server) retryDelay() time.Duration {
	return min(s.cfg.ConfirmRetry, max(s.cfg.RollbackAfter/4, time.Second))
}

// confirm runs one job; done is false when it must be asked again. (An
// early run on a notice is confirmEarly.)
func (s *Server) confirm(ctx context.Context, j metadata.ConfirmJob) (done bool, err error) {
	// NB: most jobs find their key confirmed already (by an early run)
	// or moved on: the current record alone says so (no inline data is
	// read, and the previous versions only when the record has some).
	cur, prev, err := s.meta.VersionsNoInline(ctx, j.Bucket, j.Key)
	if errors.Is(err, metadata.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if cur.Version != j.Version || len(prev) == 0 {
		// The key moved on (a newer write or a rollback queued its own
		// job), or there is nothing left to decide.
		return true, nil
	}
	rw := len(rewritten(cur, prev)) > 0
	verdict := verdictConfirm
	var t tally
	noted := s.noted(cur)
	if !noted || rw {
		// NB: a noted version is visible, but a previous manifest
		// rewritten by another previous one (a noncurrent version's
		// repair switch or update) goes only once that one is seen
		// visible too, which takes asking.
		t = s.ask(ctx, cur, prev)
	}
	if !noted {
		verdict = decide(cur, t, s.now().Sub(j.Since), s.cfg.RollbackAfter, s.visible)
	}
	switch verdict {
	case verdictConfirm:
		// NB: unsynced: runConfirms syncs once for the round's jobs
		// (DoneConfirms) before it removes this one.
		dropped, err := s.meta.DropPreviousNoSync(ctx, j.Bucket, j.Key, cur.Version, t.seenFn(cur, noted, s.visible))
		if err != nil {
			return false, err
		}
		// NB: a job confirmed on its first run is GCDelay past the write
		// that made the previous versions stale; a retried one may have
		// been confirmed only now, and one run early (MaxPrevious) sooner,
		// so in-flight reads get GCDelay more.
		due := s.now()
		if j.Due.Sub(j.Since) != s.cfg.GCDelay {
			due = due.Add(s.cfg.GCDelay)
		}
		for _, d := range dropped {
			s.enqueueGarbage(ctx, garbage(d, cur, s.cfg.NodeID), due)
		}
		s.m.confirms.WithLabelValues("confirmed").Inc()
		return true, nil
	case verdictRollBack:
		failed, err := s.meta.RollBack(ctx, j.Bucket, j.Key, cur.Version)
		if err != nil {
			return false, err
		}
		if failed == nil {
			return true, nil // the key moved on meanwhile
		}
		restored := prev[0]
		s.log.Warn("rolled back unconfirmed manifest", "bucket", j.Bucket, "key", j.Key,
			"failed", failed.Version.String(), "restored", restored.Version.String(), "holders", t.holders[failed.Version], "unreachable", t.unreachable)
		s.enqueueGarbage(ctx, garbage(failed, restored, s.cfg.NodeID), s.now().Add(s.cfg.GCDelay))
		if metadata.Collectable(restored) {
			s.enqueueTombstone(ctx, restored) // its check ended when it was replaced
		}
		if len(prev) > 1 {
			// The restored version replaced older ones here; it needs
			// confirming in turn.
			s.enqueueConfirm(ctx, restored)
		}
		s.m.confirms.WithLabelValues("rolled_back").Inc()
		return true, nil
	}
	s.m.confirms.WithLabelValues("retried").Inc()
	return false, nil
}

// askRounds bounds how many times ask follows the placements of newer
// versions: a key moved by a repair and then overwritten elsewhere is two
// hops from the placement this server knows.
const askRounds = 3

// ask tallies which versions of cur's key the servers hold, this one
// included: first cur's placement, then, for every version newer than
// cur that a server reported, the servers of its placement not asked
// yet, so that a version moved elsewhere is counted where it lives.
func (s *Server) ask(ctx context.Context, cur *metadata.Manifest, prev []*metadata.Manifest) tally {
	t := tally{holders: map[metadata.Version]int{}, manifests: map[metadata.Version]*metadata.Manifest{}}
	// NB: this server counts even when it is not in the placement (a
	// repair moved its shards away): readers count every server's vote.
	t.add(cur, prev)
	asked := map[string]bool{s.cfg.NodeID: true}
	next := slices.Clone(cur.Placement)
	for _, m := range rewritten(cur, prev) {
		// NB: a noncurrent version's switch may have moved it off cur's
		// placement; its holders are counted where it went.
		next = append(next, m.Placement...)
	}
	for range askRounds {
		if next = notAsked(next, asked); len(next) == 0 {
			break
		}
		s.askPeers(ctx, cur.Bucket, cur.Key, next, &t)
		next = nil
		for v, m := range t.manifests {
			if cur.Version.Less(v) {
				next = append(next, m.Placement...)
			}
		}
	}
	return t
}

// rewritten returns the previous manifests that rewrite an older one of
// their version ID (a noncurrent version's repair switch or metadata
// update), other than cur's ID (cur replaces those itself): what the
// confirm job must see visible before it drops what they rewrote. An
// unversioned key's overwrites all share cur's (null) ID, so it has none.
func rewritten(cur *metadata.Manifest, prev []*metadata.Manifest) []*metadata.Manifest {
	var out []*metadata.Manifest
	for _, m := range prev {
		if m.VersionID != cur.VersionID && slices.ContainsFunc(prev, func(p *metadata.Manifest) bool {
			return p.VersionID == m.VersionID && p.Version.Less(m.Version)
		}) {
			out = append(out, m)
		}
	}
	return out
}

// notAsked returns the IDs of ids not in asked, once each, and marks them
// asked.
func notAsked(ids []string, asked map[string]bool) []string {
	var out []string
	for _, id := range ids {
		if !asked[id] {
			asked[id] = true
			out = append(out, id)
		}
	}
	return out
}

// askPeers adds what the servers ids hold of bucket/key to t.
func (s *Server) askPeers(ctx context.Context, bucket, key string, ids []string, t *tally) {
	var mu sync.Mutex // NB: the goroutines below count into t
	var wg sync.WaitGroup
	for _, id := range ids {
		addr, ok := "", false
		if s.cfg.Peers != nil {
			addr, ok = s.cfg.Peers(id)
		}
		if !ok {
			mu.Lock()
			t.unreachable++
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, confirmCallTimeout)
			defer cancel()
			pc, pp, err := s.peers.GetManifestVersions(cctx, addr, bucket, key)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, shardrpc.ErrNotFound):
				// Answered: holds no version.
			case err != nil:
				t.unreachable++
				s.log.Debug("confirm: peer did not answer", "node", id, "err", err)
			default:
				t.add(pc, pp)
			}
		})
	}
	wg.Wait()
}

// enqueueGarbage queues shard files for deletion at due. The GC loop checks
// again, before deleting, that no kept version claims them.
func (s *Server) enqueueGarbage(ctx context.Context, refs []shardRef, due time.Time) {
	if len(refs) == 0 {
		return
	}
	items := make([]metadata.GCItem, len(refs))
	for i, r := range refs {
		items[i] = metadata.GCItem{FileID: r.fileID, Idx: r.idx, Due: due}
	}
	if err := s.meta.EnqueueGCs(ctx, items); err != nil {
		s.log.Error("enqueue gc", "files", len(items), "err", fmt.Errorf("shardserver: %w", err))
	}
}
