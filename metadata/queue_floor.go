package metadata

import (
	"bytes"
	"errors"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// The store's queues (confirm, garbage and tombstone jobs) are keys
// ordered by when they are due, taken from the front and deleted when
// done. In an LSM a delete leaves a tombstone that stays until a
// compaction reaches the key's bottom level, so a scan from the front of
// a queue steps over every job done since then: during the repair of a
// quarter of a million objects the confirm queue's scans grew from nothing
// to 4% of a shard server's CPU in eight minutes (every switch queues a
// confirm job on each of its servers), and a million-object repair slowed
// as it went. So each queue remembers where its first live key is
// (queueFloor) and its scans start there: they step over the tombstones
// of the last round of jobs only.

// queueFloor is a lower bound on one queue's live keys: no key of the
// queue below key exists. A scan raises it to the first key it found;
// every write of a queue key lowers it, and a write made while a scan
// runs keeps that scan from raising it past the written key (the scan's
// snapshot may not see it).
type queueFloor struct {
	scanMu sync.Mutex // one scan at a time, so a scan knows the writes made during it

	mu       sync.Mutex
	key      []byte // nil: unknown (a scan starts at the queue's first key)
	scanning bool
	written  []byte // the least key written while a scan runs (nil: none)
}

// begin starts a scan of the queue whose keys begin at lo: it returns
// where to start. end must follow.
func (f *queueFloor) begin(lo []byte) []byte {
	f.scanMu.Lock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scanning, f.written = true, nil
	if f.key == nil || bytes.Compare(f.key, lo) < 0 {
		return lo
	}
	return f.key
}

// end ends a scan begun with begin; first is the first live key it found,
// or its upper bound when it found none (no key below it exists), or nil
// when the scan failed (the floor stays).
func (f *queueFloor) end(first []byte) {
	defer f.scanMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scanning = false
	if first == nil {
		return
	}
	// NB: keys below the scan's start did not exist when it began, keys
	// between its start and first were not in its snapshot, and those
	// written since are at or above written.
	if f.written != nil && bytes.Compare(f.written, first) < 0 {
		first = f.written
	}
	f.key = bytes.Clone(first)
	f.written = nil
}

// wrote notes keys of the queue written: the floor goes down to the
// least of them. It is called after their commit (whether or not it
// succeeded): noted before it, a scan that began in between, whose
// snapshot lacks them, could raise the floor past them.
func (f *queueFloor) wrote(keys ...[]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		if f.key != nil && bytes.Compare(k, f.key) < 0 {
			f.key = bytes.Clone(k)
		}
		if f.scanning && (f.written == nil || bytes.Compare(k, f.written) < 0) {
			f.written = bytes.Clone(k)
		}
	}
}

// scanQueue calls fn with the keys and values of the queue that begins at
// lo, in order, from the floor f up to hi, until fn returns false or an
// error; the floor rises to the first key seen.
func (s *Store) scanQueue(f *queueFloor, lo, hi []byte, fn func(k, v []byte) (more bool, err error)) error {
	var first []byte
	start := f.begin(lo)
	defer func() { f.end(first) }()
	if bytes.Compare(start, hi) >= 0 {
		// NB: a scan up to an earlier time than one before it (a clock
		// stepped back): no key below the floor exists.
		return nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	var ferr error
	for valid := it.First(); valid; valid = it.Next() {
		if first == nil {
			first = bytes.Clone(it.Key())
		}
		more, err := fn(it.Key(), it.Value())
		if err != nil || !more {
			ferr = err
			break
		}
	}
	if err := errors.Join(ferr, it.Error()); err != nil {
		first = nil
		return err
	}
	if first == nil {
		first = hi
	}
	return nil
}
