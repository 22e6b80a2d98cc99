package repair

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

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
	code, err := w.codes.Get(old.Code)
	if err != nil {
		return err
	}
	nm := *old
	nm.Placement = slices.Clone(old.Placement)
	for i, n := range rebuilt {
		nm.Placement[i] = n.ID
	}
	nm.Version = metadata.Version{TS: old.Version.TS + 1, Writer: noncurrentWriter(w.cfg.NodeID)}
	addr := func(id string) string {
		if ni := v.nodes[id]; ni.Live {
			return ni.Addr
		}
		return ""
	}

	// Fence.
	var oldLive []string
	for _, id := range old.Placement {
		if addr(id) != "" {
			oldLive = append(oldLive, id)
		}
	}
	var mu sync.Mutex
	same, newer := 0, false
	var finish *metadata.Manifest
	var g errgroup.Group
	for _, id := range oldLive {
		g.Go(func() error {
			cur, prev, err := vsh.GetManifestVersions(ctx, addr(id), old.Bucket, old.Key)
			if err != nil {
				return nil // NB: not found or unreachable: holds nothing to count
			}
			f := fenceVersion(old, &nm, append(prev, cur))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case f.newer:
				newer = true
			case f.finish != nil:
				if finish == nil || finish.Version.Less(f.finish.Version) {
					finish = f.finish
				}
				same++
			case f.holds:
				same++
			}
			return nil
		})
	}
	g.Wait()
	ref := fmt.Sprintf("%s/%s version %s", old.Bucket, old.Key, old.S3VersionID())
	if newer {
		return fmt.Errorf("%w: %s", ErrSuperseded, ref)
	}
	if need := max(code.DataShards(), len(oldLive)/2+1); same < need {
		// NB: not a failure to retry at once: a version fewer than k
		// servers hold is not visible (a failed write kept below k), or
		// they do not answer now; the next scan looks again.
		return fmt.Errorf("%w: fence %s: %d of %d live servers hold version %s, need %d", errRetryLater, ref, same, len(oldLive), old.Version, need)
	}
	if finish != nil {
		nm = *finish
		if nm.Inline == nil {
			nm.Inline = old.Inline
		}
		rebuilt = map[int]Node{}
		for i, id := range finish.Placement {
			if id != old.Placement[i] {
				rebuilt[i] = Node{ID: id, Addr: addr(id)}
			}
		}
	}

	// Write to the old and the new placement.
	targets := slices.Clone(oldLive)
	for _, i := range slices.Sorted(maps.Keys(rebuilt)) {
		if id := rebuilt[i].ID; !slices.Contains(targets, id) {
			targets = append(targets, id)
		}
	}
	held := 0
	var errs []error
	for _, id := range targets {
		g.Go(func() error {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			ok, err := vsh.PutVersion(cctx, addr(id), &nm)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("node %s: %w", id, err))
			case ok:
				held++
			default:
				errs = append(errs, fmt.Errorf("node %s: does not hold the switch", id))
			}
			return nil
		})
	}
	g.Wait()
	if quorum := min(code.DataShards()+1, len(targets)); held < quorum {
		return fmt.Errorf("repair: switch %s: %d of %d servers hold it, need %d: %w", ref, held, len(targets), quorum, errors.Join(errs...))
	}
	return nil
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
