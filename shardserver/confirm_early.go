package shardserver

import (
	"context"

	"golang.org/x/sync/errgroup"

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
// record). A notice dropped because the queue is full, an early run that
// finds the version not noted or needs to ask the peers, or a drop lost
// to a crash (early drops are not synced; the job's own run syncs) leave
// the work to the job, as before. The garbage of what an early run drops
// is due GCDelay after it (confirm: a job confirmed before its time), so
// reads in flight keep their shard files as long as before.

const (
	// earlyQueue bounds the notices waiting for an early run: a few
	// notice batches (shardrpc.MaxBatch versions each).
	earlyQueue = 8192
	// earlyBatch is how many early runs are taken from the queue at once,
	// earlyWorkers how many of them run at a time.
	earlyBatch   = 256
	earlyWorkers = 8
)

// expedite queues an early run of the confirm job of a noted version; a
// full queue drops it (the job runs when due).
func (s *Server) expedite(v shardrpc.VersionRef) {
	select {
	case s.early <- v:
	default:
	}
}

// runEarlyConfirms runs the confirm jobs of noted versions as the notices
// arrive, until ctx is done.
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
		var g errgroup.Group
		g.SetLimit(earlyWorkers)
		for _, v := range batch {
			g.Go(func() error {
				now := s.now()
				j := metadata.ConfirmJob{Bucket: v.Bucket, Key: v.Key, Version: v.Version, Since: now, Due: now}
				if _, err := s.confirm(ctx, j, true); err != nil && ctx.Err() == nil {
					s.log.Debug("early confirm", "bucket", v.Bucket, "key", v.Key, "err", err)
				}
				return nil
			})
		}
		_ = g.Wait() // NB: the runs return no error; each logged its own
	}
}
