package repair

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/metadata"
)

// Noncurrent versions.
//
// A versioned bucket keeps every version's erasure-coded stripes, and S3
// said each was kept: a noncurrent version whose servers die is rebuilt
// like a current one. The scan, the scrubber and a drain walk the
// noncurrent versions (metadata.Store.EachVersion) after the current
// manifests, and queue the same jobs, marked noncurrent: such a job reads
// its version from the store's previous versions, and its manifest switch
// (switchVersion) rewrites that version in place without ever making it
// current. docs/VERSIONING.md, "Repair, scrub, drain", has the argument.

// versionStore is the optional capability of walking and reading the
// noncurrent versions (*metadata.Store has it); without it only current
// manifests are repaired, scrubbed and drained.
type versionStore interface {
	EachVersionAfter(ctx context.Context, after *metadata.Cursor, fn func(*metadata.Manifest) error) error
	GetVersion(ctx context.Context, bucket, key string, v metadata.Version) (*metadata.Manifest, error)
}

// versionShards is what the switch of a noncurrent version needs from the
// shard servers (*shardrpc.Client has it): every version a server holds,
// and a manifest write answered by whether the version is held.
type versionShards interface {
	GetManifestVersions(ctx context.Context, addr, bucket, key string) (*metadata.Manifest, []*metadata.Manifest, error)
	PutVersion(ctx context.Context, addr string, m *metadata.Manifest) (held bool, err error)
}

// eachVersion is eachManifest over the noncurrent versions; it does
// nothing when the store cannot walk them.
func eachVersion(ctx context.Context, store Store, fn func(*metadata.Manifest) error) error {
	vs, ok := store.(versionStore)
	if !ok {
		return nil
	}
	err := vs.EachVersionAfter(ctx, nil, func(m *metadata.Manifest) error {
		if len(m.Placement) == 0 {
			return nil
		}
		return fn(m)
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("repair: walk noncurrent versions: %w", err)
	}
	return err
}

// manifestOf returns the local manifest j repairs: the key's current one,
// or for a noncurrent job its previous version j.version (whole, inline
// data included). metadata.ErrNotFound when the store no longer holds it.
func (w *Worker) manifestOf(ctx context.Context, j *job) (*metadata.Manifest, error) {
	if !j.noncurrent {
		return w.store.GetManifest(ctx, j.bucket, j.key)
	}
	vs, ok := w.store.(versionStore)
	if !ok {
		return nil, metadata.ErrNotFound
	}
	return vs.GetVersion(ctx, j.bucket, j.key, j.version)
}

// switchFor makes the rebuilt shards part of j's version: the current
// manifest's switch, or a noncurrent version's.
func (w *Worker) switchFor(ctx context.Context, j *job, v nodeView, old *metadata.Manifest, rebuilt map[int]Node) error {
	if j.noncurrent {
		return w.switchVersion(ctx, v, old, rebuilt)
	}
	return w.switchManifest(ctx, v, old, rebuilt)
}

// switchVersion is switchManifest for a noncurrent version old: the
// rebuilt shards become part of that version, which stays noncurrent.
//
//   - The new manifest is old with the rebuilt shards' servers in
//     Placement and Version {old.TS + 1ns, "+repair-<node>"}, its
//     VersionID kept, as a current switch writes it but for the writer,
//     which loses a tie with an update of the version (noncurrentWriter).
//   - Fence: at least k (and a majority) of old's live placement servers
//     hold exactly old, current or previous. old is then visible, so no
//     removal by version ID succeeded (one reaches k+1 of the placement
//     and leaves at most n-k-1 < k copies), and k servers can serve its
//     shards. None may hold a newer manifest of its version ID (another
//     repairer's switch, an update of the version): then the switch is
//     superseded. An unfinished repair switch of old is finished instead,
//     as switchManifest does. And none may hold a version of another ID
//     between old and the switch's version, which the switch would
//     overtake where it became current (a client version within 1ns of
//     old: never seen, but cheap to rule out).
//   - Write: to old's live placement servers and the new ones
//     (PutVersion), each refused while an update of the key holds its
//     lease (an update of the version reads and writes under it).
//     A server keeps it as a previous version when its current one is
//     newer (a shard server stores an older manifest as a previous
//     version, never as current), so the switch never hides a newer
//     version; a server that knows nothing newer (a new server holding
//     nothing of the key, one that missed the newer writes) stores it as
//     current, which is what the manifest sync would hand it anyway.
//   - Done when k+1 servers hold it, like a PUT. The manifest it replaces
//     goes with the key's next confirmation (for each version ID only the
//     newest manifest is kept: metadata.Store.DropPrevious).
func (w *Worker) switchVersion(ctx context.Context, v nodeView, old *metadata.Manifest, rebuilt map[int]Node) error {
	vsh, ok := w.shards.(versionShards)
	if !ok {
		return fmt.Errorf("repair: switch %s/%s version %s: the shard client cannot write noncurrent versions", old.Bucket, old.Key, old.VersionID)
	}
	op, err := w.newSwitch(v, old, rebuilt, true)
	if err != nil {
		return err
	}

	// Fence.
	type versions struct {
		cur  *metadata.Manifest
		prev []*metadata.Manifest
		err  error
	}
	answers := make([]versions, len(op.oldLive))
	var g errgroup.Group
	for i, id := range op.oldLive {
		g.Go(func() error {
			a := &answers[i]
			// NB: not found or unreachable: holds nothing to count.
			a.cur, a.prev, a.err = vsh.GetManifestVersions(ctx, op.addr(id), old.Bucket, old.Key)
			return nil
		})
	}
	g.Wait()
	for _, a := range answers {
		op.fenceAnswer(a.cur, a.prev, a.err)
	}
	if err := op.fenced(); err != nil {
		return err
	}

	// Write to the old and the new placement.
	held := make([]bool, len(op.targets))
	errs := make([]error, len(op.targets))
	wctx, cancel := context.WithTimeout(ctx, switchWriteTimeout)
	defer cancel()
	for i, id := range op.targets {
		g.Go(func() error {
			held[i], errs[i] = vsh.PutVersion(wctx, op.addr(id), &op.nm)
			return nil
		})
	}
	g.Wait()
	for i, id := range op.targets {
		op.wrote(id, false, metadata.Version{}, held[i], errs[i])
	}
	return op.result()
}

// versionFence is what one server's versions say about the switch of a
// noncurrent version.
type versionFence struct {
	holds  bool               // it holds exactly the version repaired
	finish *metadata.Manifest // an unfinished repair switch of it
	newer  bool               // the switch must not be written
}

// fenceVersion judges one server's versions (current and previous, nil
// entries ignored) for the switch of old to nm: the pure core of
// switchVersion's fence.
func fenceVersion(old, nm *metadata.Manifest, versions []*metadata.Manifest) versionFence {
	var f versionFence
	for _, m := range versions {
		switch {
		case m == nil:
		case m.Version == old.Version:
			f.holds = true
		case m.VersionID == old.VersionID && old.Version.Less(m.Version):
			if unfinishedVersionSwitch(old, m) {
				if f.finish == nil || f.finish.Version.Less(m.Version) {
					f.finish = m
				}
				continue
			}
			f.newer = true
		case old.Version.Less(m.Version) && !nm.Version.Less(m.Version):
			// Another ID between old and the switch: the switch, where it
			// became current, would hide it.
			f.newer = true
		}
	}
	return f
}

// noncurrentWriter is the Writer of a noncurrent version's repair switch.
// An update of a noncurrent version (its tags, ACL or lock, written under
// the key's lease by a gateway: gateway/update_layer.go) also takes
// Version.TS+1 of what it read, so a switch and an update that read the
// same manifest can both be written at the same TS. "+" sorts below every
// gateway writer ("gw-..."), so the update wins that tie on every server:
// the version is then repaired again from the update, which is never
// hidden by the switch.
func noncurrentWriter(node string) string { return noncurrentPrefix + node }

const noncurrentPrefix = "+repair-"

// unfinishedVersionSwitch reports whether cur is a repair switch of
// exactly the noncurrent version old (the next version, written by a
// repairer, same object otherwise), as unfinishedSwitch does for current
// ones.
func unfinishedVersionSwitch(old, cur *metadata.Manifest) bool {
	return cur.Version.TS == old.Version.TS+1 && strings.HasPrefix(cur.Version.Writer, noncurrentPrefix) &&
		cur.VersionID == old.VersionID && len(cur.Placement) == len(old.Placement) && len(cur.Parts) == len(old.Parts) && !cur.Deleted
}
