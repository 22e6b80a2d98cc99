package metadata

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// PutBucket stores b if it is newer (by Version) than the stored record of
// its name. A deleted bucket is a record with Deleted set, kept so that a
// late, older create cannot resurrect it.
func (s *Store) PutBucket(ctx context.Context, b *Bucket) (stored bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if b.Name == "" || b.Version.IsZero() {
		return false, fmt.Errorf("%w: %q needs a name and a version", ErrInvalidBucket, b.Name)
	}
	s.bucketMu.Lock()
	defer s.bucketMu.Unlock()
	cur, err := s.getBucket(b.Name)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return false, err
	case !cur.Version.Less(b.Version):
		return false, nil
	}
	var flags byte
	if b.Deleted {
		flags = flagDeleted
	}
	val, err := encodeValue(flags, b)
	if err != nil {
		return false, err
	}
	if err := s.db.Set(bucketKey(b.Name), val, pebble.Sync); err != nil {
		return false, fmt.Errorf("metadata: put bucket %s: %w", b.Name, err)
	}
	return true, nil
}

// GetBucket returns the record of bucket name (possibly a tombstone), or
// ErrNotFound.
func (s *Store) GetBucket(ctx context.Context, name string) (*Bucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.getBucket(name)
}

func (s *Store) getBucket(name string) (*Bucket, error) {
	val, err := s.get(bucketKey(name))
	if err != nil {
		return nil, err
	}
	b := new(Bucket)
	if err := decodeValue(val, b); err != nil {
		return nil, fmt.Errorf("%w: bucket %s: %w", ErrCorruptRecord, name, err)
	}
	return b, nil
}

// ListBuckets returns every bucket record in name order, tombstones
// included (the caller merges several servers' lists; newest wins).
func (s *Store) ListBuckets(ctx context.Context) ([]Bucket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lo := []byte{nsBucket}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixSuccessor(lo)})
	if err != nil {
		return nil, fmt.Errorf("metadata: list buckets: %w", err)
	}
	defer it.Close()
	var out []Bucket
	for valid := it.First(); valid; valid = it.Next() {
		var b Bucket
		if err := decodeValue(it.Value(), &b); err != nil {
			return nil, fmt.Errorf("%w: bucket %q: %w", ErrCorruptRecord, it.Key()[1:], err)
		}
		out = append(out, b)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("metadata: list buckets: %w", err)
	}
	return out, nil
}
