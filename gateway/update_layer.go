package gateway

import (
	"context"
	"errors"

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
// For now it holds the key's lease (as conditional writes do, so it
// serialises with them and with repair's manifest switch), reads the
// current manifest and writes it back with a new version to the servers of
// its placement. The shard files are shared by both versions, so the
// replaced one frees nothing (shard GC only collects files the current
// version no longer references).
func (l *layer) updateObject(ctx context.Context, bucket, key string, fn func(*metadata.Manifest) error) (*metadata.Manifest, error) {
	kl, err := l.lockKey(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	defer kl.release()
	cur, err := l.readManifest(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	m := *cur
	if err := fn(&m); err != nil {
		return nil, err
	}
	if m.Size != cur.Size || len(m.Parts) != len(cur.Parts) || len(m.Placement) != len(cur.Placement) {
		return nil, errors.New("updateObject: fn changed the object's data")
	}
	m.Version = l.clock.next()
	quorum := len(m.Placement)/2 + 1
	if c, err := l.code(m.Code); err == nil {
		quorum = min(c.DataShards()+1, len(m.Placement))
	}
	if err := l.writeManifest(ctx, &m, m.Placement, quorum); err != nil {
		return nil, err
	}
	return &m, nil
}
