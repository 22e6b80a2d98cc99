package metadata

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Tombstone collection.
//
// A delete leaves a tombstone (a Deleted manifest) on the servers of the
// key's placement. Once every shard server holds that tombstone or
// nothing, and none holds anything older, the tombstone tells nobody
// anything and the shard server collects it (shardserver/tombstones.go,
// docs/CONSISTENCY.md "Tombstone collection"). The store keeps the queue
// of tombstones to check, so the work is proportional to deletes (no
// walk), and removes one exact tombstone on request.
//
// Keys (namespace 't' is unused elsewhere, see store_keys.go):
//
//	't' due(8, BE ns) esc(bucket) esc(key) version     tombstone job (JSON TombstoneJob)
const nsTombstone byte = 't'

// TombstoneJob asks the shard server to check, once due, whether the
// tombstone Version of a key can be collected.
type TombstoneJob struct {
	Bucket  string  `json:"bucket"`
	Key     string  `json:"key"`
	Version Version `json:"version"`
	// Due is when the job runs next.
	Due time.Time `json:"due"`
	// Attempts counts the runs that could not decide (a server did not
	// answer, or one still held an older version); retries back off.
	Attempts int `json:"attempts,omitempty"`
}

func tombstoneKey(j TombstoneJob) []byte {
	k := binary.BigEndian.AppendUint64([]byte{nsTombstone}, uint64(j.Due.UnixNano()))
	k = appendEscaped(k, j.Bucket)
	k = appendEscaped(k, j.Key)
	return append(k, j.Version.String()...)
}

// Collectable reports whether m is a tombstone collection may ever remove:
// a delete of the null version (an unversioned bucket's DELETE, a
// suspended bucket's null delete). A versioned delete marker is a
// version the user sees (ListObjectVersions), never collected.
func Collectable(m *Manifest) bool {
	return m != nil && m.Deleted && m.VersionID == "" && !m.Versioned
}

// EnqueueTombstone queues j to run at j.Due. Queuing the same tombstone
// twice is harmless: a job re-reads the key when it runs.
//
// The write is not synced on its own: every delete stores a tombstone
// on each of its servers, and an fsync more per tombstone would slow
// every delete for the sake of garbage. The job is in pebble's log at
// once (a process crash keeps it) and durable with the next synced write
// (any manifest or queue write); a machine crash in between loses it,
// and that tombstone then stays, which is the safe side.
func (s *Store) EnqueueTombstone(ctx context.Context, j TombstoneJob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	val, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("metadata: enqueue tombstone: %w", err)
	}
	k := tombstoneKey(j)
	err = s.db.Set(k, val, pebble.NoSync)
	s.tombFloor.wrote(k)
	if err != nil {
		return fmt.Errorf("metadata: enqueue tombstone %s/%s: %w", j.Bucket, j.Key, err)
	}
	s.mu.Lock()
	s.mu.stats.TombstoneJobs++
	s.mu.Unlock()
	return nil
}

// DueTombstones returns up to limit tombstone jobs due at or before now,
// oldest first. They stay queued until DoneTombstones.
func (s *Store) DueTombstones(ctx context.Context, now time.Time, limit int) ([]TombstoneJob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	lo := []byte{nsTombstone}
	hi := binary.BigEndian.AppendUint64([]byte{nsTombstone}, uint64(now.UnixNano())+1)
	var out []TombstoneJob
	err := s.scanQueue(&s.tombFloor, lo, hi, func(k, v []byte) (bool, error) {
		var j TombstoneJob
		if err := json.Unmarshal(v, &j); err != nil {
			return false, fmt.Errorf("%w: tombstone job %q: %w", ErrCorruptRecord, k, err)
		}
		// NB: the key is authoritative for Due (DoneTombstones recomputes it).
		if !bytes.Equal(tombstoneKey(j), k) {
			return false, fmt.Errorf("%w: tombstone job %q does not match its key", ErrCorruptRecord, k)
		}
		out = append(out, j)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: due tombstones: %w", err)
	}
	return out, nil
}

// DoneTombstones removes jobs from the queue and queues next (retries,
// with their new Due) in the same synced batch, so a crash repeats a job
// rather than losing it.
func (s *Store) DoneTombstones(ctx context.Context, done []TombstoneJob, next []TombstoneJob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	keys := make([][]byte, len(next))
	for i, j := range next {
		val, err := json.Marshal(j)
		if err != nil {
			return fmt.Errorf("metadata: requeue tombstone: %w", err)
		}
		keys[i] = tombstoneKey(j)
		if err := b.Set(keys[i], val, nil); err != nil {
			return fmt.Errorf("metadata: requeue tombstone: %w", err)
		}
	}
	for _, j := range done {
		if err := b.Delete(tombstoneKey(j), nil); err != nil {
			return fmt.Errorf("metadata: done tombstone: %w", err)
		}
	}
	err := b.Commit(pebble.Sync)
	s.tombFloor.wrote(keys...)
	if err != nil {
		return fmt.Errorf("metadata: done tombstones: %w", err)
	}
	s.mu.Lock()
	s.mu.stats.TombstoneJobs += int64(len(next) - len(done))
	s.mu.Unlock()
	return nil
}

// RemoveTombstone removes the manifest of (bucket, key) if it is exactly
// the collectable tombstone v, current, with no previous version under it;
// it reports whether it removed it. Anything else (a newer write, an
// older version kept under the tombstone, no manifest at all) is left
// as it is, so the call is idempotent and never takes away a version a
// reader could count.
func (s *Store) RemoveTombstone(ctx context.Context, bucket, key string, v Version) (bool, error) {
	return s.removeTombstone(ctx, pebble.Sync, bucket, key, v)
}

// TombstoneRef names one tombstone of a bucket: its key and version.
type TombstoneRef struct {
	Key     string
	Version Version
}

// RemoveTombstones is RemoveTombstone for many tombstones of bucket, with
// one sync for them all instead of one each: removed[i] tells of refs[i].
// Each removal is judged and written under its key's lock, as alone; all
// are durable when it returns. On an error the removals before it stand
// (in pebble's log, synced by the next synced write), which a later check
// finds done.
func (s *Store) RemoveTombstones(ctx context.Context, bucket string, refs []TombstoneRef) ([]bool, error) {
	removed := make([]bool, len(refs))
	for i, r := range refs {
		ok, err := s.removeTombstone(ctx, pebble.NoSync, bucket, r.Key, r.Version)
		if err != nil {
			return nil, err
		}
		removed[i] = ok
	}
	if err := s.syncLog(); err != nil {
		return nil, err
	}
	return removed, nil
}

// syncLog makes every write committed so far durable: pebble's log is
// one file synced in order, so syncing it now covers earlier unsynced
// commits.
func (s *Store) syncLog() error {
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("metadata: sync: %w", err)
	}
	return nil
}

func (s *Store) removeTombstone(ctx context.Context, opts *pebble.WriteOptions, bucket, key string, v Version) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	unlock := s.lockKey(manifestKey(bucket, key))
	defer unlock()
	cur, prev, err := s.versionsLocked(bucket, key)
	if err != nil {
		return false, ignoreNotFound(err)
	}
	if cur.Version != v || !Collectable(cur) || len(prev) > 0 {
		return false, nil
	}
	if err := s.writeVersionsWith(opts, bucket, key, cur, nil, nil, nil, PutResult{}, nil); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.mu.stats.TombstonesCollected++
	s.mu.Unlock()
	return true, nil
}

// countTombstoneJobs counts the queued tombstone jobs (at Open).
func (s *Store) countTombstoneJobs() (int64, error) {
	lo := []byte{nsTombstone}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixSuccessor(lo)})
	if err != nil {
		return 0, fmt.Errorf("metadata: count tombstone jobs: %w", err)
	}
	defer it.Close()
	var n int64
	for valid := it.First(); valid; valid = it.Next() {
		n++
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("metadata: count tombstone jobs: %w", err)
	}
	return n, nil
}
