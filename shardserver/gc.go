package shardserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/regen-s3/regen/metadata"
)

// shardRef names one shard file.
type shardRef struct {
	fileID string
	idx    int
}

// heldBy returns the shard files of m that node holds: for each part, the
// shard at node's position in the placement. A tombstone holds none.
func heldBy(m *metadata.Manifest, node string) []shardRef {
	if m == nil || m.Deleted {
		return nil
	}
	var out []shardRef
	for idx, id := range m.Placement {
		if id != node {
			continue
		}
		for _, p := range m.Parts {
			out = append(out, shardRef{p.ID, idx})
		}
	}
	return out
}

// garbage returns the shard files node held for old that it does not hold
// for cur.
func garbage(old, cur *metadata.Manifest, node string) []shardRef {
	keep := make(map[shardRef]bool)
	for _, r := range heldBy(cur, node) {
		keep[r] = true
	}
	var out []shardRef
	for _, r := range heldBy(old, node) {
		if !keep[r] {
			out = append(out, r)
		}
	}
	return out
}

// storeManifest stores m with the jobs its result calls for queued in the
// same batch (putJobs), then does the rest (afterPut).
func (s *Server) storeManifest(ctx context.Context, m *metadata.Manifest) (metadata.PutResult, error) {
	res, errs := s.storeManifests(ctx, []*metadata.Manifest{m})
	return res[0], errs[0]
}

// storeManifests is storeManifest for many manifests, written in one
// synced batch (metadata.Store.PutManifestsQueued).
func (s *Server) storeManifests(ctx context.Context, ms []*metadata.Manifest) ([]metadata.PutResult, []error) {
	wake := false
	results, errs := s.meta.PutManifestsQueued(ctx, ms, func(res metadata.PutResult) (*metadata.ConfirmJob, *metadata.TombstoneJob) {
		cj, tj := s.putJobs(res)
		if cj != nil && !cj.Due.After(cj.Since) {
			wake = true
		}
		return cj, tj
	})
	if wake {
		s.wakeConfirms()
	}
	// NB: the manifests are stored; their follow-up work is done even if
	// the client has gone away meanwhile.
	for i, res := range results {
		if errs[i] == nil {
			s.afterPut(context.WithoutCancel(ctx), res)
		}
	}
	return results, errs
}

// putJobs returns the jobs a manifest write calls for, which the store
// queues in the write's own batch (one sync for both). Nothing becomes
// garbage on the spot: a replaced version, or an older one that lost a
// race, is kept as a previous version until a confirm job has checked
// that the current version is held by a write quorum (see confirm.go). A
// key with metadata.MaxPrevious previous versions is confirmed at once
// (a hot key's replaced versions go every few writes, not after a GC
// delay's worth of them; one job, not this and the usual one). A stored
// null tombstone gets its collection check (tombstones.go).
func (s *Server) putJobs(res metadata.PutResult) (*metadata.ConfirmJob, *metadata.TombstoneJob) {
	var cj *metadata.ConfirmJob
	switch {
	case res.Previous >= metadata.MaxPrevious:
		cj = s.confirmJob(res.Current, 0)
	case (res.Stored && res.Replaced != nil) || res.Kept:
		cj = s.confirmJob(res.Current, s.cfg.GCDelay)
	}
	var tj *metadata.TombstoneJob
	if res.Stored && metadata.Collectable(res.Current) {
		tj = s.tombstoneJob(res.Current)
	}
	return cj, tj
}

// afterPut does what a manifest write calls for besides its jobs
// (putJobs): it tells OnStored, and collects, after GCDelay, the versions
// pushed out by metadata.MaxPreviousKept (the only ones collected
// directly). Failures are logged, not returned: the manifest is stored,
// and kept versions are only ever too many, never too few.
func (s *Server) afterPut(ctx context.Context, res metadata.PutResult) {
	if res.Stored && s.cfg.OnStored != nil {
		s.cfg.OnStored(res.Current)
	}
	due := s.now().Add(s.cfg.GCDelay)
	for _, d := range res.Dropped {
		s.enqueueGarbage(ctx, garbage(d, res.Current, s.cfg.NodeID), due)
	}
}

// collectGarbage deletes the shard files whose GC is due, unless a current
// manifest has since claimed them again. It returns how many it deleted.
func (s *Server) collectGarbage(ctx context.Context) (int, error) {
	deleted := 0
	for {
		items, err := s.meta.DueGC(ctx, s.now(), 256)
		if err != nil || len(items) == 0 {
			return deleted, err
		}
		for _, it := range items {
			held, err := s.holds(ctx, it.FileID, it.Idx)
			if err != nil {
				return deleted, err
			}
			if held {
				s.log.Info("gc skipped: shard claimed again", "file", it.FileID, "idx", it.Idx)
				continue
			}
			if err := s.shards.remove(it.FileID, it.Idx); err != nil {
				return deleted, err
			}
			deleted++
			s.m.gcDeleted.WithLabelValues("replaced").Inc()
			s.log.Debug("gc deleted shard", "file", it.FileID, "idx", it.Idx)
		}
		if err := s.meta.DoneGC(ctx, items...); err != nil {
			return deleted, err
		}
	}
}

// holds reports whether a current manifest, or a previous version the
// store keeps, places shard idx of part fileID on this node.
func (s *Server) holds(ctx context.Context, fileID string, idx int) (bool, error) {
	return s.holdsWhere(ctx, fileID, idx, func(*metadata.Manifest) bool { return true })
}

// holdsWhere is holds counting only the manifests that match.
func (s *Server) holdsWhere(ctx context.Context, fileID string, idx int, match func(*metadata.Manifest) bool) (bool, error) {
	owners, err := s.meta.PartOwners(ctx, fileID)
	if err != nil {
		return false, err
	}
	for _, o := range owners {
		cur, prev, err := s.meta.Versions(ctx, o.Bucket, o.Key)
		if errors.Is(err, metadata.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		for _, m := range append([]*metadata.Manifest{cur}, prev...) {
			if !match(m) {
				continue
			}
			for _, r := range heldBy(m, s.cfg.NodeID) {
				if r == (shardRef{fileID, idx}) {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// sweepOrphans deletes shard files older than OrphanAge that no manifest
// references, and temp files of writes that never finished. A file whose
// part ID some manifest references is kept even if this node is not in
// its placement: this node's copy of the manifest may be stale, and
// dropping such shards is the GC queue's job, driven by manifest changes.
func (s *Server) sweepOrphans(ctx context.Context) (int, error) {
	cutoff := s.now().Add(-s.cfg.OrphanAge)
	deleted := 0
	err := s.shards.walk(func(f storedFile) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !f.modTime.Before(cutoff) || (f.fileID == "" && !f.temp) {
			return nil
		}
		reason := "temp"
		if !f.temp {
			owners, err := s.meta.PartOwners(ctx, f.fileID)
			if err != nil {
				return err
			}
			if len(owners) > 0 {
				return nil
			}
			reason = "orphan"
		}
		if err := s.shards.fs.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("shardserver: remove orphan %s: %w", f.path, err)
		}
		deleted++
		s.m.gcDeleted.WithLabelValues(reason).Inc()
		s.log.Info("removed orphan", "path", f.path, "reason", reason)
		return nil
	})
	return deleted, err
}
