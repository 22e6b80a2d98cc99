package metadata

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// The store's side of range digests (digest.go): the sums, in memory,
// rebuilt at Open by the scan that rebuilds Stats and kept by
// writeVersions; and a range index on disk, so that listing the entries of
// one range reads that range's keys only.
//
// Keys (namespace 'h' is unused elsewhere, see store_keys.go):
//
//	'h' range(2, BE) esc(bucket) key   a current manifest a digest may hold (empty value)
//	'h' 0xFF                           the index is complete (written once, at Open)
//
// A store written by a binary without the index has no marker; Open then
// builds the index in its scan. (A binary without it that writes to a
// store afterwards leaves the index stale: delete the marker to rebuild.)
const nsRange byte = 'h'

var rangeIndexDone = []byte{nsRange, 0xFF}

func rangePrefix(r int) []byte { return []byte{nsRange, byte(r >> 8), byte(r)} }

func rangeKey(bucket, key string) []byte {
	return append(appendEscaped(rangePrefix(KeyRange(bucket, key)), bucket), key...)
}

// inRangeIndex reports whether m, a current manifest, belongs in the
// range index: some peer's shared set may hold it.
func (s *Store) inRangeIndex(m *Manifest) bool {
	return m != nil && !m.Deleted && s.nodeID != "" && slices.Contains(m.Placement, s.nodeID) && len(m.Placement) > 1
}

// indexChange adds to b the range index change of a key whose current
// manifest goes from oldCur to newCur.
func (s *Store) indexChange(b *pebble.Batch, oldCur, newCur *Manifest) error {
	was, is := s.inRangeIndex(oldCur), s.inRangeIndex(newCur)
	switch {
	case is && !was:
		return b.Set(rangeKey(newCur.Bucket, newCur.Key), nil, nil)
	case was && !is:
		return b.Delete(rangeKey(oldCur.Bucket, oldCur.Key), nil)
	}
	return nil
}

// digestChange updates the sums for a key whose current manifest went
// from oldCur to newCur; s.mu is held.
func (s *Store) digestChange(oldCur, newCur *Manifest) {
	if oldCur == newCur {
		return
	}
	s.mu.digests.Toggle(oldCur)
	s.mu.digests.Toggle(newCur)
}

// RangeDigest returns the range sums of the manifests this server shares
// with peer (see Shared).
func (s *Store) RangeDigest(peer string) *RangeSums {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.digests.Peer(peer)
}

// RangeRoot returns the root of RangeDigest(peer) (RangeSums.Root),
// kept until the sums change: an idle cluster's servers compare roots
// with every peer each sync interval, and a root is a hash of 64 KiB.
func (s *Store) RangeRoot(peer string) Sum {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.digests.Root(peer)
}

// RangeEntries returns the manifests this server shares with peer whose
// keys fall in ranges, by range then key. Writes made meanwhile may or
// may not be seen.
func (s *Store) RangeEntries(ctx context.Context, peer string, ranges []int) ([]RangeEntry, error) {
	var out []RangeEntry
	for _, r := range ranges {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if r < 0 || r >= DigestRanges {
			return nil, fmt.Errorf("metadata: range %d out of [0, %d)", r, DigestRanges)
		}
		keys, err := s.rangeKeys(r)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			val, err := s.get(manifestKey(k.Bucket, k.Key))
			if errors.Is(err, ErrNotFound) {
				continue // changed since the index was read
			}
			if err != nil {
				return nil, err
			}
			m, err := decodeManifest(val)
			if err != nil {
				return nil, fmt.Errorf("%w: manifest %s/%s: %w", ErrCorruptRecord, k.Bucket, k.Key, err)
			}
			if Shared(m, s.nodeID, peer) {
				// NB: cloned: the decoder's strings share a copy of the
				// whole record (inline data included), which the entry
				// would otherwise keep alive until the answer is sent.
				out = append(out, RangeEntry{Bucket: strings.Clone(m.Bucket), Key: strings.Clone(m.Key), Version: m.Version})
			}
		}
	}
	return out, nil
}

// rangeKeys returns the keys in range r of the index.
func (s *Store) rangeKeys(r int) ([]ObjectRef, error) {
	pre := rangePrefix(r)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixSuccessor(pre)})
	if err != nil {
		return nil, fmt.Errorf("metadata: range index: %w", err)
	}
	defer it.Close()
	var out []ObjectRef
	for valid := it.First(); valid; valid = it.Next() {
		bucket, key, err := readEscaped(it.Key()[len(pre):])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
		}
		out = append(out, ObjectRef{Bucket: bucket, Key: string(key)})
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("metadata: range index: %w", err)
	}
	return out, nil
}

// rangeIndexBuilder writes the range index of a store that has none,
// during the scan at Open: a batch at a time, and the marker last, so a
// crash midway builds it again at the next Open.
type rangeIndexBuilder struct {
	s *Store
	b *pebble.Batch
}

// newRangeIndexBuilder returns nil when the index is complete.
func (s *Store) newRangeIndexBuilder() (*rangeIndexBuilder, error) {
	if s.nodeID == "" {
		return nil, nil
	}
	_, err := s.get(rangeIndexDone)
	switch {
	case err == nil:
		return nil, nil
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	return &rangeIndexBuilder{s: s, b: s.db.NewBatch()}, nil
}

func (ib *rangeIndexBuilder) add(m *Manifest) error {
	if ib == nil || !ib.s.inRangeIndex(m) {
		return nil
	}
	if err := ib.b.Set(rangeKey(m.Bucket, m.Key), nil, nil); err != nil {
		return fmt.Errorf("metadata: build range index: %w", err)
	}
	if ib.b.Count() >= 10000 {
		if err := ib.b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("metadata: build range index: %w", err)
		}
		ib.b.Close()
		ib.b = ib.s.db.NewBatch()
	}
	return nil
}

func (ib *rangeIndexBuilder) finish() error {
	if ib == nil {
		return nil
	}
	defer ib.b.Close()
	if err := ib.b.Set(rangeIndexDone, nil, nil); err != nil {
		return fmt.Errorf("metadata: build range index: %w", err)
	}
	if err := ib.b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("metadata: build range index: %w", err)
	}
	return nil
}
