package metadata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	gojson "github.com/goccy/go-json"
)

// Errors returned by Store.
var (
	// ErrNotFound is returned when a manifest or bucket record is absent.
	// A tombstone is not absent: it is returned with Deleted set.
	ErrNotFound = errors.New("metadata: not found")
	// ErrInvalidBucket is returned when a bucket record fails validation.
	ErrInvalidBucket = errors.New("metadata: invalid bucket")
	// ErrInvalidAccessKey is returned when an access key record fails
	// validation.
	ErrInvalidAccessKey = errors.New("metadata: invalid access key")
	// ErrInvalidQuery is returned for a listing without a bucket.
	ErrInvalidQuery = errors.New("metadata: invalid list query")
	// ErrCorruptRecord is returned when a stored value cannot be decoded.
	ErrCorruptRecord = errors.New("metadata: corrupt record")
	// ErrLocked is returned when a removal or a write would take away
	// what a version's object lock keeps (Lock.Protects, Lock.AllowsNext).
	ErrLocked = errors.New("metadata: version protected by object lock")
)

// Options configure Open. The zero value is usable.
type Options struct {
	// FS is the file system pebble uses. Nil means the OS's; tests pass
	// vfs.NewMem().
	FS vfs.FS
	// NodeID is this shard server's node ID. Stats counts the shard files
	// this node holds as the parts of live manifests whose Placement names
	// it. Empty: Stats.Shards is 0.
	NodeID string
	// Logger receives pebble's log lines. Nil discards them.
	Logger *slog.Logger
	// Now is the clock object lock is judged by (a retention in force
	// refuses removals and weaker writes of its version). Nil: time.Now.
	Now func() time.Time
	// CacheSize is pebble's block cache in bytes. 0: DefaultCacheSize.
	CacheSize int64
}

// DefaultCacheSize is the block cache of a store opened without one. A
// manifest lookup reads an sstable's index and data block; with pebble's
// own 8 MB default a shard server of a few thousand objects already read
// them from the file on most lookups (a third of its CPU in a DeleteObjects
// run went to those reads).
const DefaultCacheSize = 32 << 20

// Store is the pebble-backed metadata store of one shard server: manifests,
// a part-ID index, bucket records and a GC queue. All writes are synced
// before they return, so a nil error means durable.
//
// Store is safe for concurrent use. Writes to one (bucket, key) are
// serialised by a striped lock, so the check "is this newer than what is
// stored" and the write are atomic; writes to different keys proceed in
// parallel and share pebble's group commit.
type Store struct {
	db     *pebble.DB
	sched  *quietScheduler // the DB's compaction scheduler
	nodeID string
	now    func() time.Time

	// keyLocks are striped by hash of the manifest key. Batches lock up to
	// 500 keys (lockKeys): with 256 stripes one took most of them, and a
	// repair's early confirmations waited for the stripes in 20 of 30
	// goroutine dumps (BENCHMARKS.md, twelfth run); 4,096 stripes leave
	// a batch about a tenth.
	keyLocks [4096]sync.Mutex
	bucketMu sync.Mutex // serialises bucket read-modify-writes
	keyMu    sync.Mutex // serialises access key read-modify-writes

	// Where each queue's first live key is (queue_floor.go).
	confirmFloor, gcFloor, tombFloor queueFloor

	// misuse counts pebble's reports of a single delete that met no set
	// or more than one (EngineStats.SingleDeleteMisuse).
	misuse atomic.Int64

	mu struct {
		sync.Mutex
		stats   Stats    // kept in memory; rebuilt by a scan at Open
		digests *Digests // likewise (store_digest.go)
	}
}

// Stats summarise what a store holds.
type Stats struct {
	Objects    int64 `json:"objects"`    // live (non-tombstone) manifests
	Tombstones int64 `json:"tombstones"` // delete tombstones
	Bytes      int64 `json:"bytes"`      // sum of the sizes of live objects
	Shards     int64 `json:"shards"`     // shard files this node holds for live objects
	// Inline counts live objects stored inside their manifest whose
	// placement names this node: it holds a whole copy of each, which a
	// drain must move like a shard.
	Inline int64 `json:"inline"`
	// Previous counts the previous versions kept beside current
	// manifests (delete markers included): the noncurrent versions of
	// versioned buckets, and replaced versions awaiting their
	// confirmation. PreviousBytes sums their sizes, PreviousShards the
	// shard files this node holds for them (not in Shards).
	Previous       int64 `json:"previous"`
	PreviousBytes  int64 `json:"previous_bytes"`
	PreviousShards int64 `json:"previous_shards"`
	// TombstoneJobs counts the tombstones queued for collection here
	// (store_tombstones.go); TombstonesCollected those this store removed
	// since it was opened.
	TombstoneJobs       int64 `json:"tombstone_jobs"`
	TombstonesCollected int64 `json:"tombstones_collected"`
}

// PutResult reports what PutManifest did.
type PutResult struct {
	// Stored is true when the manifest was newer than the stored one and
	// became current (or nothing was stored).
	Stored bool
	// Kept is true when the manifest was older than the current one (its
	// write lost a race) and is kept as a previous version.
	Kept bool
	// Held is true when the manifest's version is held here after the
	// call: stored as current, kept as a previous version, or held
	// already (a retry). The repair switch of a noncurrent version, which
	// is older than the current one everywhere, counts its copies by it.
	Held bool
	// Current is the manifest now current for the key (it may alias the
	// argument when Stored). Never nil after a successful call.
	Current *Manifest
	// Replaced is the manifest the new one replaced, nil when Stored is
	// false or nothing was stored. It is kept as a previous version: its
	// shard files stay until the replacement is confirmed.
	Replaced *Manifest
	// Dropped are the previous versions pushed out by MaxPreviousKept (the
	// argument itself when it is one of them). Their shard files may now
	// be garbage; the caller decides (after a delay, so in-flight reads of
	// them finish).
	Dropped []*Manifest
	// Previous is how many previous versions the key has now that a
	// confirmation would drop (a versioned bucket's noncurrent versions
	// do not count); from MaxPrevious on, the caller should confirm the
	// key at once.
	Previous int
}

// ObjectRef names one object.
type ObjectRef struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	po := &pebble.Options{
		FS:                 opts.FS,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{opts.Logger},
		CacheSize:          opts.CacheSize,
	}
	if po.CacheSize <= 0 {
		po.CacheSize = DefaultCacheSize
	}
	// Most reads are point lookups of one key's versions, many of keys a
	// table does not hold (a lookup asks every level): a bloom filter per
	// table answers those without reading its blocks.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	sched := newQuietScheduler()
	po.Experimental.CompactionScheduler = sched
	// Previous records and confirm jobs are removed by single deletes
	// (stageVersions, DoneConfirm), which are right only for a key set
	// once since its last delete. Pebble reports a single delete that met
	// no set or a second one when a compaction sees it: counted and
	// logged, so a broken invariant shows instead of a record coming back
	// unnoticed.
	s := &Store{sched: sched, nodeID: opts.NodeID, now: opts.Now}
	po.EventListener = &pebble.EventListener{PossibleAPIMisuse: func(info pebble.PossibleAPIMisuseInfo) {
		if info.Kind == pebble.IneffectualSingleDelete || info.Kind == pebble.NondeterministicSingleDelete {
			s.misuse.Add(1)
		}
		if opts.Logger != nil {
			opts.Logger.Error("metadata store: "+info.String(), "component", "pebble")
		}
	}}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("metadata: open %s: %w", dir, err)
	}
	s.db = db
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.rebuildStats(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the store. No other method may be called after or during it.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("metadata: close: %w", err)
	}
	return nil
}

// PutManifest stores m if it is newer (by Version) than the manifest stored
// for its (bucket, key), so replicas converge whatever order writes arrive
// in. A tombstone (Deleted) is stored like any other manifest. A version
// already held (current or previous) is not stored again, which makes
// retries idempotent.
//
// Nothing is discarded on the spot (see Versions): the replaced manifest
// becomes a previous version, and an older m is kept as one, because
// neither write is known to have reached a quorum yet.
func (s *Store) PutManifest(ctx context.Context, m *Manifest) (PutResult, error) {
	return s.PutManifestQueued(ctx, m, nil)
}

// PutJobs returns the jobs a manifest write's result calls for (nil:
// none), to be queued in the write's own batch.
type PutJobs func(PutResult) (*ConfirmJob, *TombstoneJob)

// PutManifestQueued is PutManifest that also queues the jobs jobs (nil:
// none) returns for the write's result, in the same synced batch: the
// write and its jobs are durable together, with one sync instead of one
// each (an overwrite or a delete costs every server of its placement a
// confirm job).
func (s *Store) PutManifestQueued(ctx context.Context, m *Manifest, jobs PutJobs) (PutResult, error) {
	if err := s.checkPut(ctx, m); err != nil {
		return PutResult{}, err
	}
	unlock := s.lockKey(manifestKey(m.Bucket, m.Key))
	b := s.db.NewBatch()
	defer b.Close()
	res, done, err := s.putLocked(b, m, jobs)
	if err != nil || done == nil {
		unlock()
		return res, err
	}
	if err := s.commitUnlocking(b, done, unlock); err != nil {
		return PutResult{}, fmt.Errorf("metadata: write versions of %s/%s: %w", m.Bucket, m.Key, err)
	}
	return res, nil
}

// commitUnlocking commits b, staged under the key locks unlock releases,
// and returns once it is durable, but releases the locks before the
// log's fsync: done (the staging's after-commit step) runs under them,
// right after the commit.
//
// Why not hold them through the sync: a batch of 500 manifests (a repair
// switch, DeleteObjects) holds most of the store's lock stripes, so every
// other write and early confirmation on the server waited for its fsync,
// one batch after another, where pebble would have synced them together.
// (Measured, BENCHMARKS.md twelfth run: a quarter-million repair 22%
// faster than without it, within the spread of runs; the early
// confirmations dropped as many notices as before.) Nothing is weaker for it: pebble makes a commit visible
// to readers before its log sync in any case (DB.ApplyNoSyncWait's
// documentation), a write that reads this one under the lock is logged
// after it (the log is one file, synced in order, so a crash cannot keep
// the later and lose this one), and the caller is answered only after
// the sync (syncLog covers every commit before it).
func (s *Store) commitUnlocking(b *pebble.Batch, done func(bool), unlock func()) error {
	err := b.Commit(pebble.NoSync)
	done(err == nil)
	unlock()
	if err != nil {
		return err
	}
	return s.syncLog()
}

// checkPut checks a manifest to be written, and names a versioned
// bucket's version by its own version.
func (s *Store) checkPut(ctx context.Context, m *Manifest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := m.Validate(); err != nil {
		return err
	}
	if m.Versioned && m.VersionID == "" {
		// NB: the write's own version names it (Manifest.Versioned).
		m.VersionID = m.Version.String()
	}
	return nil
}

// putLocked decides the write of m (checkPut) and stages its records in
// b; the caller holds the key's lock and commits b. A nil done means
// nothing was staged (the version is held already); otherwise the caller
// calls done once the commit has been tried (stageVersions). An error
// after records were staged leaves b unusable.
func (s *Store) putLocked(b *pebble.Batch, m *Manifest, jobs PutJobs) (PutResult, func(bool), error) {
	cur, prev, err := s.versionsLocked(m.Bucket, m.Key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return PutResult{}, nil, err
	}
	if holdsVersion(m.Version, cur, prev) {
		return PutResult{Stored: false, Held: true, Current: cur}, nil, nil
	}
	if e := newestOf(m.VersionID, cur, prev); e != nil && e.Version.Less(m.Version) {
		// NB: a newer manifest of the version replaces it (the confirm
		// job keeps the newest of each ID), so whoever sends it, it may
		// neither change a locked version's data nor drop a COMPLIANCE
		// retention in force.
		if e.Lock.Retained(s.now()) {
			if err := s.loadInline(m.Bucket, m.Key, e); err != nil { // NB: to compare
				return PutResult{}, nil, err
			}
		}
		if err := replaceLocked(e, m, s.now()); err != nil {
			return PutResult{}, nil, err
		}
	}
	var res PutResult
	var kept []*Manifest
	newCur := cur
	if !m.Newer(cur) {
		var dropped []*Manifest
		kept, dropped = withPrevious(cur, prev, m)
		held := !slices.Contains(dropped, m)
		res = PutResult{Kept: held, Held: held, Current: cur, Dropped: dropped, Previous: len(replacedOf(cur, kept))}
	} else {
		kept, newCur = prev, m
		var dropped []*Manifest
		if cur != nil {
			kept, dropped = withPrevious(m, prev, cur)
		}
		res = PutResult{Stored: true, Held: true, Current: m, Replaced: cur, Dropped: dropped, Previous: len(replacedOf(m, kept))}
	}
	done, err := s.stageVersions(b, m.Bucket, m.Key, cur, prev, newCur, kept, res, jobs)
	if err != nil {
		return PutResult{}, nil, err
	}
	return res, done, nil
}

// PutManifestsQueued is PutManifestQueued for many manifests, written in
// one synced batch: a DeleteObjects request sends each server hundreds of
// tombstones, and a commit and a sync each cost more than most keys'
// records (a commit per key was a fifth of a shard server's CPU). The
// keys' locks are held until the batch's commit (its sync) returns, as
// one key's are for its own batch, so that no other write of those keys
// is decided on a record not yet durable. A manifest of a key already in
// the batch, or every manifest if staging one failed, is written on its
// own after it. results[i] and errs[i] are ms[i]'s.
func (s *Store) PutManifestsQueued(ctx context.Context, ms []*Manifest, jobs PutJobs) (results []PutResult, errs []error) {
	results, errs = make([]PutResult, len(ms)), make([]error, len(ms))
	var batch, alone []int
	keys := make([][]byte, 0, len(ms))
	seen := make(map[string]bool, len(ms))
	for i, m := range ms {
		if errs[i] = s.checkPut(ctx, m); errs[i] != nil {
			continue
		}
		k := manifestKey(m.Bucket, m.Key)
		if seen[string(k)] {
			alone = append(alone, i)
			continue
		}
		seen[string(k)] = true
		batch = append(batch, i)
		keys = append(keys, k)
	}
	if !s.putBatch(ms, batch, keys, jobs, results, errs) {
		alone = append(batch, alone...)
	}
	for _, i := range alone {
		results[i], errs[i] = s.PutManifestQueued(ctx, ms[i], jobs)
	}
	return results, errs
}

// putBatch writes ms[i] for every i of batch (keys[j] the manifest key of
// batch[j], all different) in one synced batch. It reports false, having
// written nothing, if staging one of them failed.
func (s *Store) putBatch(ms []*Manifest, batch []int, keys [][]byte, jobs PutJobs, results []PutResult, errs []error) bool {
	if len(batch) == 0 {
		return true
	}
	unlock := s.lockKeys(keys)
	b := s.db.NewBatch()
	defer b.Close()
	var dones []func(bool)
	for _, i := range batch {
		n := b.Count()
		res, done, err := s.putLocked(b, ms[i], jobs)
		switch {
		case err != nil && b.Count() != n:
			unlock()
			return false // NB: b holds part of its records
		case err != nil:
			errs[i] = err
		default:
			results[i] = res
			if done != nil {
				dones = append(dones, done)
			}
		}
	}
	if len(dones) == 0 {
		unlock()
		return true
	}
	err := s.commitUnlocking(b, func(ok bool) {
		for _, done := range dones {
			done(ok)
		}
	}, unlock)
	if err != nil {
		for _, i := range batch {
			if errs[i] == nil {
				results[i], errs[i] = PutResult{}, fmt.Errorf("metadata: write a batch of manifests: %w", err)
			}
		}
	}
	return true
}

// GetManifest returns the current manifest of (bucket, key), a tombstone
// included, or ErrNotFound.
func (s *Store) GetManifest(ctx context.Context, bucket, key string) (*Manifest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.getManifest(bucket, key)
}

func (s *Store) getManifest(bucket, key string) (*Manifest, error) {
	m, _, err := s.getCurrent(bucket, key, readInline)
	return m, err
}

// getCurrent returns the current manifest of (bucket, key), with the
// inline data read asks for, and its record's flags.
func (s *Store) getCurrent(bucket, key string, read inlineRead) (*Manifest, byte, error) {
	val, err := s.get(manifestKey(bucket, key))
	if err != nil {
		return nil, 0, err
	}
	m, err := decodeManifest(val)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: manifest %s/%s: %w", ErrCorruptRecord, bucket, key, err)
	}
	m.home = homeOfCurrent(val[1])
	if read == readInline || read == readToMove && m.home == homeKey {
		if err := s.loadInline(bucket, key, m); err != nil {
			return nil, 0, err
		}
	}
	return m, val[1], nil
}

// PartOwners returns the objects whose current manifests reference part ID
// id (normally at most one; shard file IDs are unique per part). An empty
// result means a shard file with that ID is garbage.
func (s *Store) PartOwners(ctx context.Context, id string) ([]ObjectRef, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pre := partPrefix(id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixSuccessor(pre)})
	if err != nil {
		return nil, fmt.Errorf("metadata: part owners: %w", err)
	}
	defer it.Close()
	var refs []ObjectRef
	for valid := it.First(); valid; valid = it.Next() {
		bucket, key, err := readEscaped(it.Key()[len(pre):])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
		}
		refs = append(refs, ObjectRef{Bucket: bucket, Key: string(key)})
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("metadata: part owners: %w", err)
	}
	return refs, nil
}

// Stats returns counts of what the store holds. They are kept in memory,
// rebuilt by one scan at Open.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	if err := ctx.Err(); err != nil {
		return Stats{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.stats, nil
}

// add counts (sign=+1) or uncounts (sign=-1) manifest m.
func (st *Stats) add(m *Manifest, sign int64, nodeID string) {
	if m == nil {
		return
	}
	if m.Deleted {
		st.Tombstones += sign
		return
	}
	st.Objects += sign
	st.Bytes += sign * m.Size
	if nodeID == "" {
		return
	}
	for _, id := range m.Placement {
		if id != nodeID {
			continue
		}
		st.Shards += sign * int64(len(m.Parts))
		if len(m.Parts) == 0 {
			st.Inline += sign
		}
	}
}

// addPrevious counts (sign=+1) or uncounts (sign=-1) previous version m.
func (st *Stats) addPrevious(m *Manifest, sign int64, nodeID string) {
	st.Previous += sign
	if m.Deleted {
		return
	}
	st.PreviousBytes += sign * m.Size
	if slices.Contains(m.Placement, nodeID) && nodeID != "" {
		st.PreviousShards += sign * int64(len(m.Parts))
	}
}

func (s *Store) rebuildStats() error {
	lo := []byte{nsManifest}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixSuccessor(lo)})
	if err != nil {
		return fmt.Errorf("metadata: scan stats: %w", err)
	}
	defer it.Close()
	var st Stats
	digests := NewDigests(s.nodeID)
	index, err := s.newRangeIndexBuilder()
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		m, err := decodeManifest(it.Value())
		if err != nil {
			return fmt.Errorf("%w: key %q: %w", ErrCorruptRecord, it.Key(), err)
		}
		st.add(m, +1, s.nodeID)
		digests.Toggle(m)
		if err := index.add(m); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("metadata: scan stats: %w", err)
	}
	if err := index.finish(); err != nil {
		return err
	}
	lo = []byte{nsPrevious}
	pit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixSuccessor(lo)})
	if err != nil {
		return fmt.Errorf("metadata: scan stats: %w", err)
	}
	defer pit.Close()
	for valid := pit.First(); valid; valid = pit.Next() {
		m, err := decodeManifest(pit.Value())
		if err != nil {
			return fmt.Errorf("%w: key %q: %w", ErrCorruptRecord, pit.Key(), err)
		}
		st.addPrevious(m, +1, s.nodeID)
	}
	if err := pit.Error(); err != nil {
		return fmt.Errorf("metadata: scan stats: %w", err)
	}
	if st.TombstoneJobs, err = s.countTombstoneJobs(); err != nil {
		return err
	}
	s.mu.Lock()
	s.mu.stats = st
	s.mu.digests = digests
	s.mu.Unlock()
	return nil
}

// get returns a copy of the value at k, or ErrNotFound.
func (s *Store) get(k []byte) ([]byte, error) {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("metadata: get: %w", err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

func (s *Store) lockKey(k []byte) (unlock func()) {
	mu := &s.keyLocks[s.keyStripe(k)]
	mu.Lock()
	return mu.Unlock
}

func (s *Store) keyStripe(k []byte) int {
	h := fnv.New32a()
	h.Write(k)
	return int(h.Sum32() % uint32(len(s.keyLocks)))
}

// lockKeys locks the keys' stripes, each once, in ascending order: no
// path holds one stripe while it waits for another, so a lockKeys cannot
// deadlock with lockKey or with another lockKeys.
func (s *Store) lockKeys(keys [][]byte) (unlock func()) {
	stripes := make([]int, len(keys))
	for i, k := range keys {
		stripes[i] = s.keyStripe(k)
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, i := range stripes {
		s.keyLocks[i].Lock()
	}
	return func() {
		for _, i := range stripes {
			s.keyLocks[i].Unlock()
		}
	}
}

// Record values are a two-byte header then JSON:
//
//	[0] valueFormat (1)
//	[1] flags: flagDeleted, flagInline (the first layout's inline data),
//	    flagPrevious (store_versions.go), flagCommitted (store_lookup.go:
//	    retired, ignored, never reused), flagInlineV (store_inline.go)
//
// The flags let listing skip tombstones and the inline lookup without
// decoding JSON. Inline data lives under its own key so that listing and
// the stats scan never read it.
const (
	valueFormat byte = 1

	flagDeleted byte = 1 << 0
	flagInline  byte = 1 << 1
)

// withoutInline is m without its inline data, to encode as a record.
func withoutInline(m *Manifest) *Manifest {
	mm := *m
	mm.Inline = nil
	return &mm
}

func encodeValue(flags byte, v any) ([]byte, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("metadata: encode: %w", err)
	}
	return append([]byte{valueFormat, flags}, js...), nil
}

// decodeManifest decodes a manifest value, without its inline data.
func decodeManifest(val []byte) (*Manifest, error) {
	m := new(Manifest)
	if err := decodeValue(val, m); err != nil {
		return nil, err
	}
	return m, nil
}

// NB: values are decoded with github.com/goccy/go-json, which reads the
// JSON encoding/json wrote (encodeValue) into the same values (checked
// field by field on random manifests by TestDecodeMatchesEncodingJSON)
// at a third of the CPU: decoding is most of a walk over every manifest
// (the repair scan's safety net, a store's Open), 8 s of CPU per 750,000
// manifests with encoding/json, and part of every lookup and listing.
func decodeValue(val []byte, v any) error {
	if len(val) < 2 || val[0] != valueFormat {
		return fmt.Errorf("unknown value format")
	}
	return decodeJSON(val[2:], v)
}

// decodeJSON is the one JSON decoder of stored values, whether read from
// pebble (decodeValue) or from a lookup reply (RawManifest.Decode), so
// the two cannot drift apart.
func decodeJSON(data []byte, v any) error { return gojson.Unmarshal(data, v) }

// pebbleLogger sends pebble's log lines to slog (or nowhere).
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l != nil {
		p.l.Info(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if p.l != nil {
		p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.Errorf(format, args...)
	// NB: pebble's contract is that Fatalf does not return.
	panic(fmt.Sprintf(format, args...))
}

var _ io.Closer = (*Store)(nil)
