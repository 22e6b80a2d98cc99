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

// deleteMarkerError is a lookup's answer when the newest visible version
// it found is a tombstone: a delete marker in a versioned bucket. It is
// errNotFound for every caller that does not ask for the marker.
type deleteMarkerError struct{ m *metadata.Manifest }

func (e *deleteMarkerError) Error() string {
	return fmt.Sprintf("%s/%s: deleted at %s", e.m.Bucket, e.m.Key, e.m.Version)
}

func (e *deleteMarkerError) Is(target error) bool { return target == errNotFound }

// matchVersion selects the manifests of one version ID (empty: the null
// version) for lookupWhere.
func matchVersion(id string) func(*metadata.Manifest) bool {
	return func(m *metadata.Manifest) bool { return m.VersionID == id }
}

// deleteVersion removes version id (empty: the null version) of
// bucket/key for good. It reads the version by the lookup rules first: a
// version proven absent is a success with nothing done (nil manifest),
// as S3 answers; unsure is errUnavailable. Then every live server of the
// key's first maxN and of the version's placement is asked to remove it,
// and it succeeds once a write quorum of the placement has (removed it
// or held none), so fewer than k servers can hold it afterwards and no
// read or listing shows it again. It returns the version removed.
//
// A removal is a write of the key: it is fenced by the key's lease like
// an unconditional write (servers refuse it while a conditional write
// holds the lease) and tried again, from the read, until leaseWait.
func (l *layer) deleteVersion(ctx context.Context, bucket, key, id string) (*metadata.Manifest, error) {
	return l.deleteVersionGuarded(ctx, bucket, key, id, nil)
}

// removalGuard is what a removal of a version by ID checks beyond the
// lookup rules. check judges the version read (object lock: removable;
// lifecycle: still due), and bypass goes to every shard server, each of
// which refuses on its own to remove a version its object lock keeps
// unless bypass lifts a GOVERNANCE retention (shardrpc.ErrLocked).
type removalGuard struct {
	check  func(*metadata.Manifest) error
	bypass bool
}

// deleteVersionGuarded is deleteVersion that asks guard (unless nil)
// about the version it read, and removes nothing when guard refuses
// (object lock: removable), returning guard's error. With a guard the
// removal holds the key's lease on every server it asks, from the read
// the guard judges to the removal: a lock update (which holds the same
// lease, updateVersion) lands either before that read or after the
// removal, never unseen between them. Without one (a bucket without
// object lock, as this gateway's cache knows it) the servers still
// refuse a locked version: AccessDenied.
func (l *layer) deleteVersionGuarded(ctx context.Context, bucket, key, id string, guard *removalGuard) (*metadata.Manifest, error) {
	var removed *metadata.Manifest
	err := l.fenced(ctx, func() error {
		var err error
		removed, err = l.deleteVersionOnce(ctx, bucket, key, id, guard)
		return err
	})
	return removed, err
}

// readForRemoval reads version id of bucket/key as a removal does: nil
// when proven absent, a delete marker as the manifest it is.
func (l *layer) readForRemoval(ctx context.Context, bucket, key, id string) (*metadata.Manifest, error) {
	m, err := l.lookupWhere(ctx, bucket, key, false, matchVersion(id))
	var dm *deleteMarkerError
	switch {
	case errors.As(err, &dm):
		return dm.m, nil
	case errors.Is(err, errNotFound):
		return nil, nil
	}
	return m, err
}

// removalTargets are the servers a removal of version m asks: its
// placement and the key's first maxN.
func (l *layer) removalTargets(m *metadata.Manifest) []string {
	order, _ := l.manifestOrder(m.Bucket, m.Key)
	targets := slices.Clone(m.Placement)
	for _, id := range order[:min(len(order), max(l.maxN, 1))] {
		if !slices.Contains(targets, id) {
			targets = append(targets, id)
		}
	}
	return targets
}

// deleteVersionOnce is one try of deleteVersionGuarded.
func (l *layer) deleteVersionOnce(ctx context.Context, bucket, key, id string, guard *removalGuard) (*metadata.Manifest, error) {
	m, err := l.readForRemoval(ctx, bucket, key, id)
	if m == nil || err != nil {
		return nil, err
	}
	if guard == nil {
		if err := l.removeVersion(ctx, m, id, l.removalTargets(m), shardrpc.NoLease, false); err != nil {
			return nil, err
		}
		return m, nil
	}
	// NB: a version the read finds locked is refused at once, without the
	// lease: the refusal takes effect at that read. The lease (a write
	// quorum of the placement) is needed only to remove, so a locked
	// version is refused with AccessDenied, not 503, while servers of its
	// placement are down (TestObjectLock with three killed).
	if err := guard.check(m); err != nil {
		return nil, err
	}
	targets := l.removalTargets(m)
	kl, err := l.lockKey(ctx, bucket, key, targets, l.writeQuorum(m))
	if err != nil {
		return nil, err
	}
	defer kl.release()
	lctx, cancel := kl.context(ctx)
	defer cancel()
	under, err := l.readForRemoval(lctx, bucket, key, id)
	switch {
	case under == nil || err != nil:
		return nil, err
	case !slices.Equal(under.Placement, m.Placement):
		// NB: fenced tries again from the read, with the lease of the
		// placement the version has now.
		return nil, fmt.Errorf("%w: version %q of %s/%s moved while its lease was taken", errNewer, id, bucket, key)
	}
	if err := guard.check(under); err != nil {
		return nil, err
	}
	if err := l.removeVersion(lctx, under, id, targets, kl.holder, guard.bypass); err != nil {
		return nil, err
	}
	return under, nil
}

// removeVersion asks every live server of targets to remove version id
// of m's key, under lease (or shardrpc.NoLease), bypassing GOVERNANCE
// retention if bypass, and succeeds once a write quorum of m's placement
// has (removed it or held none). A server that refuses because the
// version is locked (its own judgement of object lock) makes a failure
// AccessDenied: a server holding an older manifest of the version (it
// missed a lock update) may have removed its copy meanwhile, which
// repair rebuilds.
func (l *layer) removeVersion(ctx context.Context, m *metadata.Manifest, id string, targets []string, lease string, bypass bool) error {
	var mu sync.Mutex
	done := map[string]bool{}
	_, errs := l.onLive(targets, func(node, addr string) error {
		if _, err := l.shards.DeleteVersion(ctx, addr, m.Bucket, m.Key, id, lease, bypass); err != nil {
			return err
		}
		mu.Lock()
		done[node] = true
		mu.Unlock()
		return nil
	})
	ok := 0
	for _, node := range m.Placement {
		if done[node] {
			ok++
		}
	}
	if want := l.writeQuorum(m); ok < want {
		err := errors.Join(errs...)
		if errors.Is(err, shardrpc.ErrLocked) {
			return fmt.Errorf("%w: version %q of %s/%s: %w", errLockedVersion(), id, m.Bucket, m.Key, err)
		}
		return fmt.Errorf("%w: version %q of %s/%s removed on %d of %d servers, %d needed: %w",
			errUnavailable, id, m.Bucket, m.Key, ok, len(m.Placement), want, err)
	}
	return nil
}

// visibleVersions is confirmedEntry for ListObjectVersions: every version
// of the key that may be visible (its votes, counting previous versions,
// plus the silent servers reach k), the newest manifest of each version
// ID only (a repair switch or a tag update leaves an older manifest of
// the same version until it is confirmed), newest first: the first is
// returned with the others in its Previous. A null tombstone with no
// version under it is left out: it is a delete from before versioning (or
// a suspended bucket's marker over nothing), which hides nothing. ok is
// false when nothing is left.
func (l *layer) visibleVersions(same []metadata.ListEntry, silent int) (metadata.ListEntry, bool) {
	var all []metadata.ListEntry
	for _, e := range same {
		all = append(all, e)
		for _, p := range e.Previous {
			p.Key = e.Key
			all = append(all, p)
		}
	}
	votes := map[metadata.Version]int{}
	for _, e := range all {
		votes[e.Version]++
	}
	newest := map[string]metadata.ListEntry{} // by version ID
	for _, e := range all {
		if votes[e.Version] < l.listNeed(e.Code, silent) {
			continue
		}
		if have, ok := newest[e.VersionID]; !ok || have.Version.Less(e.Version) {
			newest[e.VersionID] = e
		}
	}
	var out []metadata.ListEntry
	for _, e := range newest {
		e.Previous = nil
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b metadata.ListEntry) int {
		switch {
		case b.Version.Less(a.Version):
			return -1
		case a.Version.Less(b.Version):
			return 1
		}
		return 0
	})
	if n := len(out); n > 0 && out[n-1].Deleted && out[n-1].VersionID == "" {
		out = out[:n-1]
	}
	if len(out) == 0 {
		return metadata.ListEntry{}, false
	}
	first := out[0]
	first.Previous = out[1:]
	return first, true
}

// keyVersions lists the versions of one key as ListObjectVersions does
// (visibleVersions: the newest manifest of each version ID that may be
// visible, newest first); nil when it has none.
func (l *layer) keyVersions(ctx context.Context, bucket, key string) ([]metadata.ListEntry, error) {
	res, err := l.list(ctx, listParams{Bucket: bucket, Prefix: key, After: keyBefore(key), Max: 1, Versions: true})
	if err != nil || len(res.Objects) == 0 || res.Objects[0].Key != key {
		return nil, err
	}
	e := res.Objects[0]
	return append([]metadata.ListEntry{e}, e.Previous...), nil
}
