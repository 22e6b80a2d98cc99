package gateway

import (
	"context"
	"errors"
	"slices"

	"github.com/regen-s3/regen/metadata"
)

// The two functions here are the only writers of bucket configuration
// (ACL, ownership controls, tags, CORS, policy) and of an object's
// metadata-only changes (tags, ACL). Everything that changes them goes
// through these, so that their bodies can be replaced by atomic updates on
// whatever replicates buckets and manifests, without touching the S3
// handlers.

// updateBucket applies fn to the newest record of bucket name and writes
// the result as a new version. fn may refuse the change by returning an
// error, which is returned as is; errNotFound if the bucket does not exist.
//
// For now this reads the merged record and writes it back (putBucket): two
// gateways updating different settings of one bucket at the same instant
// can lose one of the two changes (the newer record wins whole).
func (l *layer) updateBucket(ctx context.Context, cache *bucketCache, name string, fn func(*metadata.Bucket) error) error {
	cache.invalidate()
	b, err := l.bucket(ctx, cache, name)
	if err != nil {
		return err
	}
	if err := fn(&b); err != nil {
		return err
	}
	b.Version = l.clock.next()
	return l.putBucket(ctx, cache, &b)
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
