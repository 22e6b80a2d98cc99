package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// The two functions here are the only writers of an existing bucket's
// record (ACL, ownership controls, tags, CORS, policy, lifecycle,
// encryption, code, deletion) and of a version's metadata-only changes
// (tags, ACL, object lock) of the current version or any other.
// Everything that changes them goes through these, so that each change is
// a read-modify-write that no other change can interleave with, without
// the S3 handlers knowing how.

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
	return l.underRecordLease(ctx, shardrpc.BucketLeaseName(name), ErrOperationAborted.With(""), func(lctx context.Context, holder string) error {
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
		// Newer than the record read, whatever this gateway's clock
		// says: an older version would be dropped by every server.
		l.clock.observe(b.Version)
		b.Version = l.clock.next()
		defer cache.invalidate()
		ids, _ := l.liveShards()
		stored, errs := l.onLive(ids, func(_, addr string) error { return l.shards.PutBucketFenced(lctx, addr, &b, holder) })
		if need := len(ids)/2 + 1; stored < need || len(ids) == 0 {
			return fmt.Errorf("%w: bucket record stored on %d of %d servers: %w", errUnavailable, stored, len(ids), errors.Join(errs...))
		}
		return nil
	})
}

// updateVersion applies fn to the newest manifest of version id of
// bucket/key (empty: the null version), current or not, and stores the
// result as a newer manifest of the same version ID with the same data:
// fn may change only metadata (tags, ACL, lock), never parts, placement,
// size or the ID. It returns the stored manifest; errNotFound when the
// version does not exist, a *deleteMarkerError when it is a delete
// marker. Tag, ACL and lock updates of any version, the current one
// included (its ID is the key's current VersionID), all come here.
//
// It holds the key's lease on the version's placement from the read to
// the write (as conditional writes do, so it serialises with them, with
// repair switches and with removals of versions by ID, and fences every
// other write of the key), reads the version again under it and writes
// the new manifest to the same servers. The shard files are shared by
// both manifests, so the replaced one frees nothing (shard GC only
// collects files no kept manifest references).
//
// The key's newest version gets a new Version from the clock, as any
// write. A noncurrent one must stay below the versions above it, so it
// takes Version.TS+1 (as a repair switch does): every server keeps it as
// a previous version, the lookups by ID take it (the newest manifest of
// its ID) and the confirm job drops the manifest it replaced
// (DropPrevious keeps the newest manifest of each ID).
func (l *layer) updateVersion(ctx context.Context, bucket, key, id string, fn func(*metadata.Manifest) error) (*metadata.Manifest, error) {
	for {
		before, _, err := l.versionAndNext(ctx, bucket, key, id)
		if err != nil {
			return nil, err
		}
		m, retry, err := l.updateVersionLocked(ctx, before, id, fn)
		if !retry {
			return m, err
		}
	}
}

// versionAndNext reads the newest visible manifest of version id of
// bucket/key (its data inline included) and the oldest Version newer
// than it that any server holds of another version ID (nil: none, it is
// the key's newest version). The bound counts manifests whether visible
// or not: room below a failed write is room below everything.
func (l *layer) versionAndNext(ctx context.Context, bucket, key, id string) (*metadata.Manifest, *metadata.Version, error) {
	var mu sync.Mutex
	var others []metadata.Version
	m, err := l.lookupWhere(ctx, bucket, key, true, func(o *metadata.Manifest) bool {
		if o.VersionID == id {
			return true
		}
		mu.Lock()
		others = append(others, o.Version)
		mu.Unlock()
		return false
	})
	if err != nil {
		return nil, nil, err
	}
	var next *metadata.Version
	for _, v := range others {
		if m.Version.Less(v) && (next == nil || v.Less(*next)) {
			next = &v
		}
	}
	return m, next, nil
}

// updateVersionLocked is one try of updateVersion under the lease of
// before's placement; retry when the version moved meanwhile.
func (l *layer) updateVersionLocked(ctx context.Context, before *metadata.Manifest, id string, fn func(*metadata.Manifest) error) (_ *metadata.Manifest, retry bool, _ error) {
	quorum := l.writeQuorum(before)
	kl, err := l.lockKey(ctx, before.Bucket, before.Key, before.Placement, quorum)
	if err != nil {
		return nil, false, err
	}
	defer kl.release()
	lctx, cancel := kl.context(ctx)
	defer cancel()
	cur, next, err := l.versionAndNext(lctx, before.Bucket, before.Key, id)
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
	if m.Size != cur.Size || len(m.Parts) != len(cur.Parts) || len(m.Placement) != len(cur.Placement) || m.VersionID != cur.VersionID {
		return nil, false, errors.New("updateVersion: fn changed the version's data")
	}
	if next == nil {
		m.Version = l.clock.next()
		if err := l.writeManifest(lctx, &m, m.Placement, quorum, kl.holder); err != nil {
			return nil, false, err
		}
		return &m, false, nil
	}
	// NB: this gateway's writer, not cur's: cur may be a repair switch
	// ("+repair-<node>"), and a second switch of it by the same node
	// would write exactly this Version with other data. Every gateway
	// writer sorts above "+", so the update wins the tie.
	m.Version = metadata.Version{TS: cur.Version.TS + 1, Writer: l.clock.writer}
	if !m.Version.Less(*next) {
		// NB: a version updated a nanosecond before the next one was
		// written, or updated as many times as nanoseconds separate them.
		return nil, false, fmt.Errorf("%w: no room for an update of version %s of %s/%s below %s", errUnavailable, cur.S3VersionID(), cur.Bucket, cur.Key, *next)
	}
	// NB: not writeManifest, which counts a server holding a newer
	// version as a refusal: here every server holds one, and keeping m as
	// a previous version is the success asked for.
	stored, errs := l.onLive(m.Placement, func(_, addr string) error {
		_, err := l.shards.PutManifestFenced(lctx, addr, &m, kl.holder)
		return err
	})
	if stored < quorum {
		// NB: stored on fewer than a write quorum; below k it is never
		// taken for the version (lookups need k holders of a manifest),
		// at k or more it is, as a failed write that stayed.
		return nil, false, fmt.Errorf("%w: update of version %s of %s/%s stored on %d servers, %d needed: %w",
			errUnavailable, cur.S3VersionID(), cur.Bucket, cur.Key, stored, quorum, errors.Join(errs...))
	}
	return &m, false, nil
}
