package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/regen-s3/regen/metadata"
)

// updateVersion is updateObject for any version of a key, current or
// not: it applies fn to the newest manifest of version id (empty: the
// null version) and stores the result as a newer manifest of the same
// version ID, with the same data (fn may change only metadata). It
// returns the stored manifest; errNotFound when the version does not
// exist, a *deleteMarkerError when it is a delete marker.
//
// The key's current version gets a new Version from the clock, as in
// updateObject. A noncurrent one must stay below the versions above it,
// so it takes Version.TS+1 (as a repair switch does): every server keeps
// it as a previous version, the lookups by ID take it (the newest
// manifest of its ID) and the confirm job drops the manifest it replaced
// (DropPrevious keeps the newest manifest of each ID). Both hold the
// key's lease from the read to the write, so updates of one version,
// repair switches and conditional writes of the key serialise.
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
	m.Version = metadata.Version{TS: cur.Version.TS + 1, Writer: cur.Version.Writer}
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
