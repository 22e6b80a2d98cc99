package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/regen-s3/regen/metadata"
)

// The two functions here are the only writers of an existing bucket's
// record (ACL, ownership controls, tags, CORS, policy, lifecycle,
// encryption, code, deletion) and of an object's metadata-only changes
// (tags, ACL). Everything that changes them goes through these, so that
// each change is a read-modify-write that no other change can interleave
// with, without the S3 handlers knowing how.

// updateBucket applies fn to the newest record of bucket name and writes
// the result as a new version. fn may refuse the change by returning an
// error, which is returned as is; errNotFound if the bucket does not exist,
// OperationAborted if other updates of the bucket kept its lease for
// leaseWait.
//
// A bucket's settings share one record, and the newest record wins whole,
// so two updates that both read the record before either wrote would lose
// one change. Each update therefore holds the record's lease (on a
// majority of the live shard servers) from its read to its write: it
// reads the record afresh under the lease, from a majority of the live
// servers (not the cache, which a concurrent reader may have filled with
// a record older than the previous holder's write), and writes it fenced
// by the lease, so the servers refuse it once the lease has run out and
// the next holder may have read. docs/CONSISTENCY.md, "Bucket records".
func (l *layer) updateBucket(ctx context.Context, cache *bucketCache, name string, fn func(*metadata.Bucket) error) error {
	kl, err := l.lockBucket(ctx, name)
	if errors.Is(err, errLeaseHeld) {
		return ErrOperationAborted.With("")
	}
	if err != nil {
		return err
	}
	defer kl.release()
	lctx, cancel := kl.context(ctx)
	defer cancel()
	all, err := mergeNewest(lctx, l, "buckets", l.shards.ListBuckets, func(b metadata.Bucket) (string, metadata.Version) { return b.Name, b.Version })
	if err != nil {
		return err
	}
	b, ok := all[name]
	if !ok || b.Deleted {
		return errNotFound
	}
	if err := fn(&b); err != nil {
		return err
	}
	// Newer than the record read, whatever this gateway's clock says: an
	// older version would be dropped by every server.
	l.clock.observe(b.Version)
	b.Version = l.clock.next()
	defer cache.invalidate()
	ids, _ := l.liveShards()
	stored, errs := l.onLive(ids, func(_, addr string) error { return l.shards.PutBucketFenced(lctx, addr, &b, kl.holder) })
	if need := len(ids)/2 + 1; stored < need || len(ids) == 0 {
		return fmt.Errorf("%w: bucket record stored on %d of %d servers: %w", errUnavailable, stored, len(ids), errors.Join(errs...))
	}
	return nil
}

// updateObject applies fn to the current manifest of bucket/key and
// stores the result as a new version of the same data: fn may change only
// metadata (tags, ACL), never parts, placement or size. It returns the
// stored manifest; errNotFound if the key has no object.
//
// It holds the key's lease on the current version's placement (as
// conditional writes do, so it serialises with them and fences every
// other write of the key), reads the current manifest again under it and
// writes it back with a new version to the same servers. The shard files
// are shared by both versions, so the replaced one frees nothing (shard
// GC only collects files the current version no longer references).
func (l *layer) updateObject(ctx context.Context, bucket, key string, fn func(*metadata.Manifest) error) (*metadata.Manifest, error) {
	for {
		before, err := l.readManifest(ctx, bucket, key)
		if err != nil {
			return nil, err
		}
		m, retry, err := l.updateLocked(ctx, before, fn)
		if !retry {
			return m, err
		}
	}
}

// updateLocked is one try of updateObject under the lease of before's
// placement; retry when the key moved to another placement meanwhile.
func (l *layer) updateLocked(ctx context.Context, before *metadata.Manifest, fn func(*metadata.Manifest) error) (_ *metadata.Manifest, retry bool, _ error) {
	quorum := l.writeQuorum(before)
	kl, err := l.lockKey(ctx, before.Bucket, before.Key, before.Placement, quorum)
	if err != nil {
		return nil, false, err
	}
	defer kl.release()
	lctx, cancel := kl.context(ctx)
	defer cancel()
	cur, err := l.readManifest(lctx, before.Bucket, before.Key)
	if err != nil {
		return nil, false, err
	}
	if !slices.Equal(cur.Placement, before.Placement) {
		return nil, true, nil
	}
	m := *cur
	if err := fn(&m); err != nil {
		return nil, false, err
	}
	if m.Size != cur.Size || len(m.Parts) != len(cur.Parts) || len(m.Placement) != len(cur.Placement) {
		return nil, false, errors.New("updateObject: fn changed the object's data")
	}
	m.Version = l.clock.next()
	if err := l.writeManifest(lctx, &m, m.Placement, quorum, kl.holder); err != nil {
		return nil, false, err
	}
	return &m, false, nil
}
