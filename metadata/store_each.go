package metadata

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// eachPage is how many records EachManifest reads under one iterator.
// Between pages no iterator is open, so a long walk (or a slow fn) never
// pins memtables and obsolete sstables for its whole duration. A page's
// manifests are decoded before fn sees them and each keeps a copy of its
// record (a 1 KiB object's is about 2 KiB), so the page is also what a
// walk holds: 256 keeps the several walks of a server (scan, scrubber,
// anti-entropy with each peer) to a few MiB, where pages of 1,000 held
// 50 MB on a shard server of a million-object cluster during repair. An
// iterator per 256 records costs little beside decoding them.
const eachPage = 256

// EachManifest calls fn with the current manifest of every live key of
// every bucket, in bucket then key order, and stops at fn's first error.
// Tombstones are skipped by their flag, without decoding, and inline data
// is not read: Manifest.Inline is nil (an inline object is the one with no
// Parts).
//
// It is for the background walks that visit every object (the repair
// scan, the scrubber, anti-entropy): each record is read and decoded once,
// where List then GetManifest decoded it twice and copied the inline data
// of every small object on every pass. Writes made during the walk may or
// may not be seen.
func (s *Store) EachManifest(ctx context.Context, fn func(*Manifest) error) error {
	return s.EachManifestAfter(ctx, nil, fn)
}

// eachManifestIn is EachManifest over the manifest keys in [lo, hi),
// leaving out the records with any of the skip flags.
func (s *Store) eachManifestIn(ctx context.Context, lo, hi []byte, skip byte, fn func(*Manifest) error) error {
	var page []*Manifest
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		page, lo, err = s.manifestPage(lo, hi, skip, page[:0])
		if err != nil {
			return err
		}
		for _, m := range page {
			if err := fn(m); err != nil {
				return err
			}
		}
		if lo == nil {
			return nil
		}
	}
}

// manifestPage decodes up to eachPage manifests with keys in [lo, hi)
// and none of the skip flags (tombstones at least) into page. next is
// where the following page starts, nil when the range is done.
func (s *Store) manifestPage(lo, hi []byte, skip byte, page []*Manifest) (_ []*Manifest, next []byte, _ error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, nil, fmt.Errorf("metadata: walk manifests: %w", err)
	}
	defer it.Close()
	read := 0
	for valid := it.First(); valid; valid = it.Next() {
		if read == eachPage {
			// The next page starts at the first record not read.
			return page, bytes.Clone(it.Key()), nil
		}
		read++
		val := it.Value()
		if len(val) < 2 {
			return nil, nil, fmt.Errorf("%w: manifest record %q", ErrCorruptRecord, it.Key())
		}
		if val[1]&skip != 0 {
			continue
		}
		m, err := decodeManifest(val)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: manifest record %q: %w", ErrCorruptRecord, it.Key(), err)
		}
		page = append(page, m)
	}
	if err := it.Error(); err != nil {
		return nil, nil, fmt.Errorf("metadata: walk manifests: %w", err)
	}
	return page, nil, nil
}
