package metadata

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Previous versions.
//
// A store keeps, beside the current manifest of a key, a few previous
// versions: the manifests the current one replaced, and older manifests
// that arrived after a newer one (writes that lost a race). Their shard
// files stay on disk and they count as votes for readers, because a
// replacement is not safe until it is confirmed: a write that reached only
// some servers (a gateway crash, a partition) must not make them drop the
// version that was acknowledged before it. The shard server decides when a
// previous version may go (DropPrevious, once the current version is held by
// a write quorum) or when the current one failed and is undone (RollBack).
//
// Invariant: every previous version is older than the current one, and a
// key has previous versions only while it has a current manifest. Every
// part of the current and previous versions is in the part index, so GC and
// the orphan sweep keep their shard files.
//
// Keys (namespaces 'v' and 'c' are unused elsewhere, see store_keys.go):
//
//	'v' esc(bucket) esc(key) ts(8, BE) writer          previous version (JSON, inline data included)
//	'c' due(8, BE ns) esc(bucket) esc(key) version     confirm job (JSON ConfirmJob)
const (
	nsPrevious byte = 'v'
	nsConfirm  byte = 'c'

	// flagPrevious marks a current manifest value whose key has previous
	// versions, so listing looks them up only then.
	flagPrevious byte = 1 << 2
)

// MaxPrevious is how many previous versions a key may gather before its
// confirmation is due at once rather than after the GC delay
// (PutResult.Previous tells the caller): a hot key, overwritten many
// times a second, is confirmed and its replaced versions dropped every
// few writes, so its versions stay few.
//
// It is not a cap. A version is never pushed out for being one too many
// while it may be the last acknowledged one: after a run of failed
// overwrites (a gateway that crashes after writing the manifest to some
// of the servers), the acknowledged version is the oldest previous one,
// and the servers the failed writes reached hold it nowhere else. Only
// the confirm job (DropPrevious: a newer version is held by a write
// quorum) and the rollback of a failed current version take previous
// versions away, and the bound below.
const MaxPrevious = 4

// MaxPreviousKept bounds the previous versions kept per key against
// pathological growth (the confirm job cannot decide while too many
// servers are unreachable, and writes keep coming). Past it the versions
// in the middle go (and are returned, so their shards can be collected):
// the oldest, the last version before the run of unconfirmed ones, and
// the newest stay. Losing an acknowledged version to it takes more than
// MaxPreviousKept unconfirmed overwrites of one key between two
// successful confirm rounds, each after an acknowledged version older
// than the newest acknowledged one.
const MaxPreviousKept = 32

func previousPrefix(bucket, key string) []byte {
	return appendEscaped(bucketPrefix(nsPrevious, bucket), key)
}

func previousKey(bucket, key string, v Version) []byte {
	k := binary.BigEndian.AppendUint64(previousPrefix(bucket, key), uint64(v.TS))
	return append(k, v.Writer...)
}

// Versions returns the current manifest of (bucket, key) and its previous
// versions, newest first. cur is nil and err ErrNotFound when the store holds
// no version of the key.
func (s *Store) Versions(ctx context.Context, bucket, key string) (cur *Manifest, prev []*Manifest, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return s.versionsWith(bucket, key, readInline)
}

// VersionsNoInline is Versions without inline data (Inline is nil, but
// for a previous record of the first layout, which holds its data), for a
// caller that decides on versions and placements alone (a confirm job): a
// small object's data is the largest read of a key's versions and lies
// deep in the LSM, unchanged since its write. The manifests may be
// written back where their data need not move (writeVersionsWith refuses
// the others).
func (s *Store) VersionsNoInline(ctx context.Context, bucket, key string) (cur *Manifest, prev []*Manifest, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return s.versionsNoInlineLocked(bucket, key)
}

// versionsNoInlineLocked is versionsLocked without inline data.
func (s *Store) versionsNoInlineLocked(bucket, key string) (*Manifest, []*Manifest, error) {
	return s.versionsWith(bucket, key, readNoInline)
}

// DropPrevious drops the previous versions of (bucket, key) that a
// version at or below upTo replaced, and returns them; their shard files
// may now be garbage. The caller has established that a version at least
// as new as upTo is safe (held by a write quorum).
//
// A previous version is replaced by a newer manifest (at or below upTo)
// of the same version ID that the caller saw visible (seen; nil: every
// one, for a caller that knows them all to be): for each version ID only
// the newest visible manifest stays. Without versioning every manifest
// is the null version (empty ID), so everything older than upTo goes; a
// versioned bucket's versions each keep their newest manifest (a repair
// switch replaces the manifest it repaired, which has its ID), and a
// suspended bucket's null write replaces only the previous null version.
// See docs/VERSIONING.md.
//
// Why seen: a repair switch of a noncurrent version that reached fewer
// than k servers is not visible; if the servers that got it dropped the
// manifest it rewrote, neither manifest of the version would have k
// holders and the version would be unreadable until a scan finished the
// switch.
func (s *Store) DropPrevious(ctx context.Context, bucket, key string, upTo Version, seen func(*Manifest) bool) ([]*Manifest, error) {
	return s.dropPrevious(ctx, pebble.Sync, bucket, key, upTo, seen)
}

// DropPreviousNoSync is DropPrevious without a sync of its own, for a
// caller that drops the previous versions of many keys and then makes
// one synced write (DoneConfirms) before it counts on any of them: the
// change is in pebble's log at once, so a process crash keeps it, and a
// machine crash before that sync loses it, which leaves the versions
// kept and their confirm job queued (the safe side: it runs again).
func (s *Store) DropPreviousNoSync(ctx context.Context, bucket, key string, upTo Version, seen func(*Manifest) bool) ([]*Manifest, error) {
	return s.dropPrevious(ctx, pebble.NoSync, bucket, key, upTo, seen)
}

func (s *Store) dropPrevious(ctx context.Context, opts *pebble.WriteOptions, bucket, key string, upTo Version, seen func(*Manifest) bool) ([]*Manifest, error) {
	fixed := func(*Manifest, []*Manifest) (Version, func(*Manifest) bool, bool) { return upTo, seen, true }
	dropped, err := s.dropPreviousMany(ctx, opts, []DropRequest{{Bucket: bucket, Key: key, Decide: fixed}})
	if err != nil {
		return nil, err
	}
	return dropped[0], nil
}

// DropRequest names a key for DropPreviousManyNoSync. Decide sees the
// key's versions as stored, under the key's lock, and returns what
// DropPrevious takes: the newest version that may replace (upTo) and
// which replacing manifests count (seen); ok false leaves the key as it
// is. It runs under the store's key locks, so it must not call the store.
type DropRequest struct {
	Bucket, Key string
	Decide      func(cur *Manifest, prev []*Manifest) (upTo Version, seen func(*Manifest) bool, ok bool)
}

// DropPreviousManyNoSync is DropPreviousNoSync for many keys at once: one
// read of each key's versions under its lock, and one commit for all of
// them (a repair's early confirmations come by the hundred; a commit and
// two reads each had them fall behind the switches, BENCHMARKS.md, tenth
// run). dropped[i] is what reqs[i] dropped. A key named twice is decided
// by its first request only.
func (s *Store) DropPreviousManyNoSync(ctx context.Context, reqs []DropRequest) (dropped [][]*Manifest, err error) {
	return s.dropPreviousMany(ctx, pebble.NoSync, reqs)
}

func (s *Store) dropPreviousMany(ctx context.Context, opts *pebble.WriteOptions, reqs []DropRequest) ([][]*Manifest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dropped := make([][]*Manifest, len(reqs))
	keys := make([][]byte, 0, len(reqs))
	first := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		k := manifestKey(r.Bucket, r.Key)
		if !first[string(k)] {
			first[string(k)] = true
			keys = append(keys, k)
		}
	}
	unlock := s.lockKeys(keys)
	defer unlock()
	b := s.db.NewBatch()
	defer b.Close()
	var dones []func(bool)
	for i, r := range reqs {
		k := string(manifestKey(r.Bucket, r.Key))
		if !first[k] {
			continue // NB: a second request of the key: the batch holds the first's change, which a read would not see
		}
		first[k] = false
		// NB: the current manifest stays what it is (only its record's
		// previous-versions flag may change), so its inline data is
		// neither read nor written.
		cur, prev, err := s.versionsNoInlineLocked(r.Bucket, r.Key)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if err != nil || len(prev) == 0 {
			continue
		}
		upTo, seen, ok := r.Decide(cur, prev)
		if !ok {
			continue
		}
		all := append([]*Manifest{cur}, prev...)
		var keep, drop []*Manifest
		for _, p := range prev {
			if p.Version.Less(upTo) && replaced(p, all, upTo, seen) {
				drop = append(drop, p)
			} else {
				keep = append(keep, p)
			}
		}
		if len(drop) == 0 {
			continue
		}
		done, err := s.stageVersions(b, r.Bucket, r.Key, cur, prev, cur, keep, PutResult{}, nil)
		if err != nil {
			return nil, err // NB: nothing committed; b goes
		}
		dones = append(dones, done)
		dropped[i] = drop
	}
	if len(dones) == 0 {
		return dropped, nil
	}
	err := b.Commit(opts)
	for _, done := range dones {
		done(err == nil)
	}
	if err != nil {
		return nil, fmt.Errorf("metadata: drop previous versions of %d keys: %w", len(dones), err)
	}
	return dropped, nil
}

// replaced reports whether one of all, at or below upTo and seen (nil:
// any), is a newer manifest of m's version ID.
func replaced(m *Manifest, all []*Manifest, upTo Version, seen func(*Manifest) bool) bool {
	for _, o := range all {
		if o != nil && o.VersionID == m.VersionID && m.Version.Less(o.Version) && !upTo.Less(o.Version) && (seen == nil || seen(o)) {
			return true
		}
	}
	return false
}

// replaceLocked refuses (ErrLocked) next as a newer manifest of version
// old at now when old's lock keeps it (Lock.Retained) and next changes
// its data, or when next drops old's COMPLIANCE retention
// (Lock.AllowsNext). Repair switches and metadata updates keep both.
func replaceLocked(old, next *Manifest, now time.Time) error {
	switch {
	case old.Lock.Retained(now) && !next.SameData(old):
		return fmt.Errorf("%w: %s/%s version %q: a newer manifest changes its data", ErrLocked, old.Bucket, old.Key, old.VersionID)
	case !old.Lock.AllowsNext(next.Lock, now):
		return fmt.Errorf("%w: %s/%s version %q is under COMPLIANCE retention until %s", ErrLocked, old.Bucket, old.Key, old.VersionID, old.Lock.RetainUntil)
	}
	return nil
}

// newestOf returns the newest of cur and prev whose version ID is id, or
// nil.
func newestOf(id string, cur *Manifest, prev []*Manifest) *Manifest {
	if cur != nil && cur.VersionID == id {
		return cur // NB: every previous version is older
	}
	for _, m := range prev { // newest first
		if m.VersionID == id {
			return m
		}
	}
	return nil
}

// DeleteVersion removes every manifest of (bucket, key) whose VersionID
// is id (empty: the null version) in one synced batch, and returns them;
// their shard files may now be garbage. When the current manifest is
// among them, the newest remaining previous version becomes current (or,
// with none, the key is removed), as RollBack does. It removes nothing
// and returns nil when the store holds no manifest of id.
//
// This is S3's DeleteObject with a versionId: the version goes for good,
// not under a newer tombstone. It is refused with ErrLocked, removing
// nothing, while the lock of the newest manifest of id protects it
// (Lock.Protects; bypass: the removal bypasses GOVERNANCE retention),
// judged under the key's lock, atomically with the removal.
func (s *Store) DeleteVersion(ctx context.Context, bucket, key, id string, bypass bool) ([]*Manifest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	unlock := s.lockKey(manifestKey(bucket, key))
	defer unlock()
	cur, prev, err := s.versionsLocked(bucket, key)
	if err != nil {
		return nil, ignoreNotFound(err)
	}
	if m := newestOf(id, cur, prev); m != nil && m.Lock.Protects(s.now(), bypass) {
		return nil, fmt.Errorf("%w: %s/%s version %q", ErrLocked, bucket, key, id)
	}
	var removed, keep []*Manifest
	newCur := cur
	if cur.VersionID == id {
		removed, newCur = append(removed, cur), nil
	}
	for _, p := range prev {
		switch {
		case p.VersionID == id:
			removed = append(removed, p)
		case newCur == nil:
			newCur = p // prev is newest first
		default:
			keep = append(keep, p)
		}
	}
	if len(removed) == 0 {
		return nil, nil
	}
	if err := s.writeVersions(bucket, key, cur, prev, newCur, keep); err != nil {
		return nil, err
	}
	return removed, nil
}

// RollBack undoes a failed write: if the current manifest of (bucket, key)
// is version failed, the newest previous version becomes current again (or,
// with none, the key is removed) and the failed manifest is returned; its
// shard files may now be garbage. Otherwise it does nothing and returns nil.
// The caller has established that failed cannot have been acknowledged.
func (s *Store) RollBack(ctx context.Context, bucket, key string, failed Version) (*Manifest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	unlock := s.lockKey(manifestKey(bucket, key))
	defer unlock()
	cur, prev, err := s.versionsLocked(bucket, key)
	if err != nil || cur.Version != failed {
		return nil, ignoreNotFound(err)
	}
	var next *Manifest
	var rest []*Manifest
	if len(prev) > 0 {
		next, rest = prev[0], prev[1:]
	}
	if err := s.writeVersions(bucket, key, cur, prev, next, rest); err != nil {
		return nil, err
	}
	return cur, nil
}

func ignoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// versionsLocked is the versions of (bucket, key) for a write under the
// key's lock: with the inline data the write would have to move
// (readToMove), which in the current layout is none.
func (s *Store) versionsLocked(bucket, key string) (*Manifest, []*Manifest, error) {
	return s.versionsWith(bucket, key, readToMove)
}

// versionsWith returns the current manifest of (bucket, key) and its
// previous versions, newest first, with the inline data read asks for.
// Previous versions are read only when the current record says the key
// has some (flagPrevious, which writeVersions keeps with them). A reader
// needs no lock, each record being read whole.
func (s *Store) versionsWith(bucket, key string, read inlineRead) (*Manifest, []*Manifest, error) {
	cur, flags, err := s.getCurrent(bucket, key, read)
	if err != nil || flags&flagPrevious == 0 {
		return cur, nil, err
	}
	prev, err := s.previous(bucket, key, read)
	if err != nil {
		return nil, nil, err
	}
	return cur, prev, nil
}

// previous returns the previous versions of (bucket, key), newest first,
// with the inline data read asks for (readToMove: none; a record of the
// first layout holds its own).
func (s *Store) previous(bucket, key string, read inlineRead) ([]*Manifest, error) {
	pre := previousPrefix(bucket, key)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixSuccessor(pre)})
	if err != nil {
		return nil, fmt.Errorf("metadata: previous versions: %w", err)
	}
	defer it.Close()
	var out []*Manifest
	for valid := it.Last(); valid; valid = it.Prev() {
		val := it.Value()
		m := new(Manifest)
		if err := decodeValue(val, m); err != nil {
			return nil, fmt.Errorf("%w: previous version of %s/%s: %w", ErrCorruptRecord, bucket, key, err)
		}
		m.home = homeOfPrevious(val[1], m)
		if read == readInline {
			if err := s.loadInline(bucket, key, m); err != nil {
				return nil, err
			}
		}
		out = append(out, m)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("metadata: previous versions: %w", err)
	}
	return out, nil
}

// withPrevious returns prev with m added, newest first, and the versions
// the MaxPreviousKept bound pushed out (possibly m itself). cur is the
// manifest that is current afterwards.
//
// The bound counts only replaced versions (a newer manifest of the same
// version ID exists, see DropPrevious): a versioned bucket's noncurrent
// versions are what the user asked to keep, never one too many. Of the
// replaced ones, those just newer than the oldest go; the oldest stays.
func withPrevious(cur *Manifest, prev []*Manifest, m *Manifest) (kept, dropped []*Manifest) {
	all := append(slices.Clone(prev), m)
	slices.SortFunc(all, func(a, b *Manifest) int {
		switch {
		case b.Version.Less(a.Version):
			return -1
		case a.Version.Less(b.Version):
			return 1
		}
		return 0
	})
	repl := replacedOf(cur, all)
	if n := len(repl); n > MaxPreviousKept {
		dropped = slices.Clone(repl[MaxPreviousKept-1 : n-1])
		kept = slices.DeleteFunc(all, func(p *Manifest) bool { return slices.Contains(dropped, p) })
		return kept, dropped
	}
	return all, nil
}

// replacedOf returns the versions of prev (newest first) that a newer
// manifest of the same version ID, cur or one of prev, replaces: those
// the confirm job will drop.
func replacedOf(cur *Manifest, prev []*Manifest) []*Manifest {
	all := append([]*Manifest{cur}, prev...)
	var out []*Manifest
	for _, p := range prev {
		if replaced(p, all, maxVersion, nil) {
			out = append(out, p)
		}
	}
	return out
}

// maxVersion is newer than every version.
var maxVersion = Version{TS: math.MaxInt64, Writer: "\xff"}

// holds reports whether m's version is among cur and prev.
func holdsVersion(v Version, cur *Manifest, prev []*Manifest) bool {
	if cur != nil && cur.Version == v {
		return true
	}
	for _, p := range prev {
		if p.Version == v {
			return true
		}
	}
	return false
}

// writeVersions moves (bucket, key) from state (oldCur, oldPrev) to
// (newCur, newPrev) in one synced batch: the current record and its inline
// data, the previous-version records, and the part index (every part of
// every version kept). The caller holds the key's lock.
func (s *Store) writeVersions(bucket, key string, oldCur *Manifest, oldPrev []*Manifest, newCur *Manifest, newPrev []*Manifest) error {
	return s.writeVersionsQueued(bucket, key, oldCur, oldPrev, newCur, newPrev, PutResult{}, nil)
}

// writeVersionsQueued is writeVersions that also queues, in the same
// batch, the jobs jobs (nil: none) returns for res.
func (s *Store) writeVersionsQueued(bucket, key string, oldCur *Manifest, oldPrev []*Manifest, newCur *Manifest, newPrev []*Manifest, res PutResult, jobs PutJobs) error {
	return s.writeVersionsWith(pebble.Sync, bucket, key, oldCur, oldPrev, newCur, newPrev, res, jobs)
}

// writeVersionsWith is writeVersionsQueued committed with opts: unsynced
// (pebble.NoSync) for the batched callers that sync once for many keys
// (syncLog) before they answer.
func (s *Store) writeVersionsWith(opts *pebble.WriteOptions, bucket, key string, oldCur *Manifest, oldPrev []*Manifest, newCur *Manifest, newPrev []*Manifest, res PutResult, jobs PutJobs) error {
	b := s.db.NewBatch()
	defer b.Close()
	done, err := s.stageVersions(b, bucket, key, oldCur, oldPrev, newCur, newPrev, res, jobs)
	if err != nil {
		return err
	}
	err = b.Commit(opts)
	done(err == nil)
	if err != nil {
		return fmt.Errorf("metadata: write versions of %s/%s: %w", bucket, key, err)
	}
	return nil
}

// stageVersions adds the records of writeVersionsWith to b. Once b's
// commit has been tried the caller calls done, with whether it succeeded:
// it notes the queue keys written for their floors (even after a failed
// commit) and, after a successful one, counts the change in the stats and
// the range sums.
func (s *Store) stageVersions(b *pebble.Batch, bucket, key string, oldCur *Manifest, oldPrev []*Manifest, newCur *Manifest, newPrev []*Manifest, res PutResult, jobs PutJobs) (done func(committed bool), err error) {
	fail := func(err error) (func(bool), error) {
		return nil, fmt.Errorf("metadata: write versions of %s/%s: %w", bucket, key, err)
	}

	// The versions stored before the write, by version: where their
	// inline data is (placeInline) and what goes with them.
	was := map[Version]*Manifest{}
	held := map[Version]bool{} // data keys that hold data (placeInline)
	for _, m := range append([]*Manifest{oldCur}, oldPrev...) {
		if m != nil {
			was[m.Version] = m
			if m.home == homeVersion {
				held[m.DataVersion()] = true
			}
		}
	}
	// keptData: the data keys the records after the write name, which
	// stay whatever version is dropped (a repair switch's new version
	// names its predecessor's).
	keptData := map[Version]bool{}
	record := func(m *Manifest, inl byte, dv Version) *Manifest {
		r := withoutInline(m)
		r.DataOf = Version{}
		if inl == flagInlineV {
			keptData[dv] = true
			if dv != m.Version {
				r.DataOf = dv
			}
		}
		return r
	}

	mk := manifestKey(bucket, key)
	keyInline := false // the new current record still has its data under 'i'
	if newCur == nil {
		if err := b.Delete(mk, nil); err != nil {
			return fail(err)
		}
	} else {
		inl, dv, err := s.placeInline(b, bucket, key, newCur, was[newCur.Version], true, held)
		if err != nil {
			return fail(err)
		}
		keyInline = inl == flagInline
		flags := inl
		if newCur.Deleted {
			flags |= flagDeleted
		}
		if len(newPrev) > 0 {
			flags |= flagPrevious
		}
		val, err := encodeValue(flags, record(newCur, inl, dv))
		if err != nil {
			return fail(err)
		}
		if err := b.Set(mk, val, nil); err != nil {
			return fail(err)
		}
	}
	if oldCur != nil && oldCur.home == homeKey && !keyInline {
		// NB: its data, if its version is kept, was just placed under
		// the version's key.
		if err := b.Delete(inlineKey(bucket, key), nil); err != nil {
			return fail(err)
		}
	}

	keepPrev := map[Version]bool{}
	for _, p := range newPrev {
		keepPrev[p.Version] = true
		if holdsVersion(p.Version, nil, oldPrev) {
			if w := was[p.Version]; w != nil && w.home == homeVersion {
				keptData[w.DataVersion()] = true
			}
			continue // NB: its record and data stay as they are
		}
		inl, dv, err := s.placeInline(b, bucket, key, p, was[p.Version], false, held)
		if err != nil {
			return fail(err)
		}
		val, err := encodeValue(prevFlags(p)|inl, record(p, inl, dv))
		if err != nil {
			return fail(err)
		}
		if err := b.Set(previousKey(bucket, key, p.Version), val, nil); err != nil {
			return fail(err)
		}
	}
	for _, p := range oldPrev {
		if !keepPrev[p.Version] {
			// NB: a single delete: a previous record is set once (above,
			// only when the key holds no record of its version, under
			// the key's lock) and deleted once, so the pair cancels
			// where they meet. A replaced version's record lives for
			// the milliseconds until its early confirmation, so the
			// pair usually meets in the memtable and neither reaches
			// a table; a plain delete would leave a tombstone that
			// every level's compaction rewrites down to the bottom
			// (BENCHMARKS.md, tenth run).
			if err := b.SingleDelete(previousKey(bucket, key, p.Version), nil); err != nil {
				return fail(err)
			}
		}
	}
	for v, m := range was {
		if m.home == homeVersion && !keepPrev[v] && (newCur == nil || newCur.Version != v) && !keptData[m.DataVersion()] {
			keptData[m.DataVersion()] = true // NB: deleted once is enough
			if err := b.Delete(inlineVersionKey(bucket, key, m.DataVersion()), nil); err != nil {
				return fail(err)
			}
		}
	}

	keepParts := map[string]bool{}
	for _, m := range append([]*Manifest{newCur}, newPrev...) {
		if m == nil {
			continue
		}
		for _, p := range m.Parts {
			if !keepParts[p.ID] {
				keepParts[p.ID] = true
				if err := b.Set(partKey(p.ID, bucket, key), nil, nil); err != nil {
					return fail(err)
				}
			}
		}
	}
	for _, m := range append([]*Manifest{oldCur}, oldPrev...) {
		if m == nil {
			continue
		}
		for _, p := range m.Parts {
			if !keepParts[p.ID] {
				keepParts[p.ID] = true // deleted once is enough
				if err := b.Delete(partKey(p.ID, bucket, key), nil); err != nil {
					return fail(err)
				}
			}
		}
	}
	if err := s.indexChange(b, oldCur, newCur); err != nil {
		return fail(err)
	}
	var tombJob bool
	var confirmK, tombK []byte // queue keys written, for their floors
	if jobs != nil {
		cj, tj := jobs(res)
		if cj != nil {
			confirmK = confirmKey(*cj)
			if err := setJSON(b, confirmK, cj); err != nil {
				return fail(err)
			}
		}
		if tj != nil {
			tombK = tombstoneKey(*tj)
			if err := setJSON(b, tombK, tj); err != nil {
				return fail(err)
			}
			tombJob = true
		}
	}
	return func(committed bool) {
		// NB: after the commit (a scan that began before it could raise
		// a floor past a key noted earlier), and even when it failed.
		if confirmK != nil {
			s.confirmFloor.wrote(confirmK)
		}
		if tombK != nil {
			s.tombFloor.wrote(tombK)
		}
		if committed {
			s.countVersions(oldCur, oldPrev, newCur, newPrev, keepPrev, tombJob)
		}
	}, nil
}

// countVersions counts a committed change of a key's versions in the
// stats and the range sums.
func (s *Store) countVersions(oldCur *Manifest, oldPrev []*Manifest, newCur *Manifest, newPrev []*Manifest, keepPrev map[Version]bool, tombJob bool) {
	s.mu.Lock()
	if tombJob {
		s.mu.stats.TombstoneJobs++
	}
	s.digestChange(oldCur, newCur)
	if oldCur != newCur {
		s.mu.stats.add(oldCur, -1, s.nodeID)
		s.mu.stats.add(newCur, +1, s.nodeID)
	}
	for _, p := range newPrev {
		if !holdsVersion(p.Version, nil, oldPrev) {
			s.mu.stats.addPrevious(p, +1, s.nodeID)
		}
	}
	for _, p := range oldPrev {
		if !keepPrev[p.Version] {
			s.mu.stats.addPrevious(p, -1, s.nodeID)
		}
	}
	s.mu.Unlock()
}

// setJSON adds the JSON of v at k to b.
func setJSON(b *pebble.Batch, k []byte, v any) error {
	val, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Set(k, val, nil)
}

func prevFlags(m *Manifest) byte {
	if m.Deleted {
		return flagDeleted
	}
	return 0
}

// previousEntries returns listing summaries of the previous versions of
// (bucket, key), newest first. Like previous, but it decodes only what a
// listing row shows (previous values carry their inline data).
func (s *Store) previousEntries(bucket, key string) ([]ListEntry, error) {
	pre := previousPrefix(bucket, key)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixSuccessor(pre)})
	if err != nil {
		return nil, fmt.Errorf("metadata: previous versions: %w", err)
	}
	defer it.Close()
	var out []ListEntry
	for valid := it.Last(); valid; valid = it.Prev() {
		e, err := decodeSummary(key, it.Value())
		if err != nil {
			return nil, fmt.Errorf("%w: previous version of %s/%s: %w", ErrCorruptRecord, bucket, key, err)
		}
		out = append(out, e)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("metadata: previous versions: %w", err)
	}
	return out, nil
}

// ConfirmJob asks the shard server to check, once due, whether the current
// version of a key is held by a write quorum (then its previous versions can
// go) or provably failed (then it is rolled back).
type ConfirmJob struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	// Version is the version that was current when the job was queued.
	Version Version `json:"version"`
	// Since is when that version became current here; a rollback waits
	// for it to be old enough.
	Since time.Time `json:"since"`
	// Due is when the job runs next.
	Due time.Time `json:"due"`
}

func confirmKey(j ConfirmJob) []byte {
	k := binary.BigEndian.AppendUint64([]byte{nsConfirm}, uint64(j.Due.UnixNano()))
	k = appendEscaped(k, j.Bucket)
	k = appendEscaped(k, j.Key)
	return append(k, j.Version.String()...)
}

// EnqueueConfirm durably queues j to run at j.Due. Queuing the same key
// twice is harmless: a job re-reads the key's versions when it runs.
func (s *Store) EnqueueConfirm(ctx context.Context, j ConfirmJob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	val, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("metadata: enqueue confirm: %w", err)
	}
	k := confirmKey(j)
	err = s.db.Set(k, val, pebble.Sync)
	s.confirmFloor.wrote(k)
	if err != nil {
		return fmt.Errorf("metadata: enqueue confirm %s/%s: %w", j.Bucket, j.Key, err)
	}
	return nil
}

// DueConfirms returns up to limit confirm jobs due at or before now, oldest
// first. They stay queued until DoneConfirm.
func (s *Store) DueConfirms(ctx context.Context, now time.Time, limit int) ([]ConfirmJob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	lo := []byte{nsConfirm}
	hi := binary.BigEndian.AppendUint64([]byte{nsConfirm}, uint64(now.UnixNano())+1)
	var out []ConfirmJob
	err := s.scanQueue(&s.confirmFloor, lo, hi, func(k, v []byte) (bool, error) {
		var j ConfirmJob
		if err := json.Unmarshal(v, &j); err != nil {
			return false, fmt.Errorf("%w: confirm job %q: %w", ErrCorruptRecord, k, err)
		}
		// NB: the key is authoritative for Due (DoneConfirm recomputes it).
		if !bytes.Equal(confirmKey(j), k) {
			return false, fmt.Errorf("%w: confirm job %q does not match its key", ErrCorruptRecord, k)
		}
		out = append(out, j)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: due confirms: %w", err)
	}
	return out, nil
}

// DoneConfirms removes done from the queue and queues next (retries,
// with their new Due) in one synced batch, so a crash repeats a job
// rather than losing it, and one sync serves a whole round of jobs (and
// makes their unsynced DropPreviousNoSync writes durable: pebble's log is
// synced in order).
func (s *Store) DoneConfirms(ctx context.Context, done, next []ConfirmJob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	// NB: deletes first: in a batch the later write of a key wins, so a
	// retry that lands on its own job's key stays queued. Single deletes,
	// as in DoneConfirm.
	for _, j := range done {
		if err := b.SingleDelete(confirmKey(j), nil); err != nil {
			return fmt.Errorf("metadata: done confirm: %w", err)
		}
	}
	keys := make([][]byte, len(next))
	for i, j := range next {
		keys[i] = confirmKey(j)
		if err := setJSON(b, keys[i], j); err != nil {
			return fmt.Errorf("metadata: requeue confirm: %w", err)
		}
	}
	err := b.Commit(pebble.Sync)
	s.confirmFloor.wrote(keys...)
	if err != nil {
		return fmt.Errorf("metadata: done confirms: %w", err)
	}
	return nil
}

// DoneConfirm removes jobs from the queue.
func (s *Store) DoneConfirm(ctx context.Context, jobs ...ConfirmJob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	// NB: single deletes, as for previous records (stageVersions): a
	// confirm job's key carries its due time in nanoseconds and its
	// version, so it is set once and deleted once, and the pair cancels
	// in the memtable when the job ran early. A job queued twice at the
	// same nanosecond (EnqueueConfirm allows it) could come back after a
	// compaction: it then runs once more and finds nothing to do.
	for _, j := range jobs {
		if err := b.SingleDelete(confirmKey(j), nil); err != nil {
			return fmt.Errorf("metadata: done confirm: %w", err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("metadata: done confirm: %w", err)
	}
	return nil
}
