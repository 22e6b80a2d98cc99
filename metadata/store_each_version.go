package metadata

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Walking the noncurrent versions.
//
// A versioned bucket's noncurrent versions keep their erasure-coded
// stripes (namespace 'v', store_versions.go), so the background walks
// that keep stripes whole (the repair scan, the scrubber, a drain) must
// visit them as they visit current manifests. EachVersion is that walk.
// It yields the previous versions that are S3 versions in their own
// right, and nothing else:
//
//   - a previous version that a newer manifest of the same version ID
//     replaced (an overwrite of the null version, the manifest a repair
//     switch or a tag update rewrote) is not: the confirm job drops it
//     (DropPrevious), and its newest manifest is the one to keep whole;
//   - delete markers are not: they have no shards.

// EachVersion calls fn with every noncurrent version of every key, in
// bucket, key, then version order (oldest first), and stops at fn's
// first error. A noncurrent version is a previous version that no newer
// manifest of its version ID (current or previous) replaced, and is not a
// delete marker. Inline data is not returned (Manifest.Inline is nil):
// GetVersion reads a version whole.
//
// Like EachManifest it reads in pages, with no iterator open between
// them; a page always ends with a key's last version, so each key's
// versions are judged together. Writes made during the walk may or may
// not be seen.
func (s *Store) EachVersion(ctx context.Context, fn func(*Manifest) error) error {
	return s.EachVersionAfter(ctx, nil, fn)
}

// EachVersionAfter is EachVersion starting after the position after: the
// first version after (after.Bucket, after.Key, *after.Version), or the
// first version of the first key after (after.Bucket, after.Key) when
// after.Version is nil; from the start when after is nil.
func (s *Store) EachVersionAfter(ctx context.Context, after *Cursor, fn func(*Manifest) error) error {
	lo := []byte{nsPrevious}
	hi := prefixSuccessor(lo)
	switch {
	case after == nil:
	case after.Version != nil:
		// NB: the writer is the last component of a previous-version key,
		// unescaped, so key+"\x00" is the smallest key after it.
		lo = append(previousKey(after.Bucket, after.Key, *after.Version), 0)
	default:
		lo = prefixSuccessor(previousPrefix(after.Bucket, after.Key))
	}
	var page []*Manifest
	for lo != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		page, lo, err = s.versionPage(lo, hi, page[:0])
		if err != nil {
			return err
		}
		for _, m := range page {
			if err := fn(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// GetVersion returns the previous version v of (bucket, key), its inline
// data included, or ErrNotFound when the store holds no previous version
// v of the key (it may be the current one, or gone).
func (s *Store) GetVersion(ctx context.Context, bucket, key string, v Version) (*Manifest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	val, err := s.get(previousKey(bucket, key, v))
	if err != nil {
		return nil, err
	}
	m := new(Manifest)
	if err := decodeValue(val, m); err != nil {
		return nil, fmt.Errorf("%w: previous version %s of %s/%s: %w", ErrCorruptRecord, v, bucket, key, err)
	}
	m.home = homeOfPrevious(val[1], m)
	if err := s.loadInline(bucket, key, m); err != nil {
		return nil, err
	}
	return m, nil
}

// versionPage decodes the noncurrent versions of the keys whose previous
// versions start in [lo, hi), about eachPage records of them, into page.
// next is where the following page starts (the first record of a key not
// read), nil when the range is done.
func (s *Store) versionPage(lo, hi []byte, page []*Manifest) (_ []*Manifest, next []byte, _ error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, nil, fmt.Errorf("metadata: walk versions: %w", err)
	}
	defer it.Close()
	var group []byte // the key's prefix: 'v' esc(bucket) esc(key)
	var versions []*Manifest
	read := 0
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		g, err := versionGroup(k)
		if err != nil {
			return nil, nil, err
		}
		if !bytes.Equal(g, group) {
			if page, err = s.noncurrent(versions, page); err != nil {
				return nil, nil, err
			}
			if read >= eachPage {
				return page, bytes.Clone(k), nil
			}
			group, versions = bytes.Clone(g), versions[:0]
		}
		read++
		val := it.Value()
		if len(val) < 2 {
			return nil, nil, fmt.Errorf("%w: previous version record %q", ErrCorruptRecord, k)
		}
		m := new(Manifest)
		if err := decodeValue(val, m); err != nil {
			return nil, nil, fmt.Errorf("%w: previous version record %q: %w", ErrCorruptRecord, k, err)
		}
		m.Inline = nil
		versions = append(versions, m)
	}
	if err := it.Error(); err != nil {
		return nil, nil, fmt.Errorf("metadata: walk versions: %w", err)
	}
	page, err = s.noncurrent(versions, page)
	return page, nil, err
}

// noncurrent appends to page the versions of one key (its previous
// versions, oldest first) that are noncurrent S3 versions: not a delete
// marker, and no newer manifest of their version ID, the key's current
// one included, replaced them.
func (s *Store) noncurrent(versions, page []*Manifest) ([]*Manifest, error) {
	if len(versions) == 0 {
		return page, nil
	}
	bucket, key := versions[0].Bucket, versions[0].Key
	all := append([]*Manifest(nil), versions...)
	val, err := s.get(manifestKey(bucket, key))
	switch {
	case errors.Is(err, ErrNotFound):
		// NB: a key has previous versions only while it has a current
		// one; judge them among themselves if that ever fails.
	case err != nil:
		return nil, err
	default:
		cur, err := decodeManifest(val)
		if err != nil {
			return nil, fmt.Errorf("%w: manifest %s/%s: %w", ErrCorruptRecord, bucket, key, err)
		}
		all = append(all, cur)
	}
	for _, m := range versions {
		if !m.Deleted && !replaced(m, all, maxVersion, nil) {
			page = append(page, m)
		}
	}
	return page, nil
}

// versionGroup returns the prefix of a previous-version key that names
// its key: 'v' esc(bucket) esc(key).
func versionGroup(k []byte) ([]byte, error) {
	if len(k) == 0 || k[0] != nsPrevious {
		return nil, fmt.Errorf("%w: previous version key %q", ErrCorruptRecord, k)
	}
	_, rest, err := readEscaped(k[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	_, rest, err = readEscaped(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	return k[:len(k)-len(rest)], nil
}
