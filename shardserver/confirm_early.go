package shardserver

import (
	"context"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Early confirmation.
//
// A notice that a repair switch is on a write quorum (PathConfirmed with
// Switch set) is all its confirm job needs to drop the versions it
// replaced. The job itself runs GCDelay (a minute) after the write; by
// then the replaced version's record, its inline data (a small object's
// 1 KiB, under its version's key: metadata/store_inline.go) and the job's
// own record have been flushed from pebble's memtable into level 0, and the
// drop's deletions follow them down the levels until compaction meets
// them. Run within a second of the notice instead, the drop deletes
// records that are still in the memtable, and the flush writes none of them.
// In a repair of a million small objects that was most of what each
// server wrote into the LSM per switch, and compaction had fallen behind
// the writes (BENCHMARKS.md, "fifth run").
//
// A gateway's notice (after an overwrite or a delete) is only noted: its
// job runs when due, so the drop's work stays out of the client's requests
// and of a burst of them (DeleteObjects of 5,000 keys ran 16% slower with
// every notice expedited), and a repair is the sustained stream of
// replaced records that compaction fell behind.
//
// It is best effort and keeps no state of its own: the job stays queued
// and, when due, finds nothing left to decide (one read of the current
// record). A notice dropped because the queue stayed full through its
// request, an early run that
// finds the version not noted or needs to ask the peers, or a drop lost
// to a crash (early drops are not synced; the job's own run syncs) leave
// the work to the job, as before. The garbage of what an early run drops
// is due GCDelay after it (confirm: a job confirmed before its time), so
// reads in flight keep their shard files as long as before.

const (
	// earlyQueue bounds the notices waiting for an early run: a few
	// notice batches (shardrpc.MaxBatch versions each). A queue four
	// times as long dropped as large a share of a repair's notices
	// (30-44%, BENCHMARKS.md twelfth run): the early runs fall behind,
	// they are not hit by bursts, so a longer queue only holds more; a
	// full queue now holds the notice back (expedite).
	earlyQueue = 8192
	// earlyBatch is how many early runs are taken from the queue at once
	// and decided in one read pass and one commit
	// (metadata.Store.DropPreviousManyNoSync): each one alone, two reads
	// and a commit, fell behind a half-million-object repair's switches
	// (a million replaced versions waiting mid-repair, BENCHMARKS.md,
	// tenth run). Batched, the queue still dropped 29% of a
	// million-object repair's notices (eleventh run).
	earlyBatch = 256
)

// expedite queues an early run of the confirm job of a noted version.
// A full queue holds the notice until there is room or ctx is done (then
// it is dropped and the job runs when due): the repair worker waits for
// its notices' answers (bounded by its noticeTimeout), so a repair goes
// no faster than its replaced versions are dropped. Dropping at once, as
// it did, let 30-44% of a repair's notices through to the jobs a minute
// later, and the replaced versions they left grew with the repair: 200,000
// to 300,000 per server twenty minutes into a million objects' repair,
// and the repair's rate halved (BENCHMARKS.md, twelfth run).
func (s *Server) expedite(ctx context.Context, v shardrpc.VersionRef) {
	select {
	case s.early <- v:
		s.m.earlyNotices.WithLabelValues("queued").Inc()
		return
	default:
	}
	select {
	case s.early <- v:
		s.m.earlyNotices.WithLabelValues("waited").Inc()
	case <-ctx.Done():
		s.m.earlyNotices.WithLabelValues("dropped").Inc()
	}
}

// runEarlyConfirms runs the confirm jobs of noted versions as the notices
// arrive, a batch at a time, until ctx is done.
func (s *Server) runEarlyConfirms(ctx context.Context) {
	batch := make([]shardrpc.VersionRef, 0, earlyBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case v := <-s.early:
			batch = append(batch, v)
		}
	more:
		for len(batch) < earlyBatch {
			select {
			case v := <-s.early:
				batch = append(batch, v)
			default:
				break more
			}
		}
		s.confirmEarly(ctx, batch)
	}
}

// confirmEarly is confirm's early run for a batch of noted versions: a
// version still current here whose notice is still noted has its
// replaced versions dropped, all in one commit; anything else (the key
// moved on, a previous manifest rewritten by another, which takes
// asking) is left to the job's own run.
func (s *Server) confirmEarly(ctx context.Context, batch []shardrpc.VersionRef) {
	reqs := make([]metadata.DropRequest, len(batch))
	curs := make([]*metadata.Manifest, len(batch))
	for i, v := range batch {
		reqs[i] = metadata.DropRequest{Bucket: v.Bucket, Key: v.Key,
			Decide: func(cur *metadata.Manifest, prev []*metadata.Manifest) (metadata.Version, func(*metadata.Manifest) bool, bool) {
				// NB: the note is taken last, only by a run that drops: a
				// job whose early run declined still finds it.
				if cur.Version != v.Version || len(rewritten(cur, prev)) > 0 || !s.noted(cur) {
					return metadata.Version{}, nil, false
				}
				curs[i] = cur
				// NB: a noted version is visible (on a write quorum): the
				// seen rule of a confirm that was told (seenFn, noted).
				return cur.Version, func(m *metadata.Manifest) bool { return m.Version == cur.Version }, true
			}}
	}
	dropped, err := s.meta.DropPreviousManyNoSync(ctx, reqs)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("early confirm", "versions", len(batch), "err", err)
		}
		return
	}
	// NB: confirmed only now, not GCDelay past the write that made them
	// stale: in-flight reads keep the shard files GCDelay more (confirm).
	due := s.now().Add(s.cfg.GCDelay)
	var refs []shardRef
	for i, d := range dropped {
		if curs[i] == nil || len(d) == 0 {
			continue
		}
		for _, m := range d {
			refs = append(refs, garbage(m, curs[i], s.cfg.NodeID)...)
		}
		s.m.confirms.WithLabelValues("confirmed_early").Inc()
	}
	s.enqueueGarbage(ctx, refs, due)
}
