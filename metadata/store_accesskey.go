package metadata

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// AccessKey is a stored S3 key pair: its ID (the access key), a name for
// people, the secret key sealed by the gateways, and what it may do
// besides the rights that bucket records grant it (Bucket.Grants). Like
// bucket records, every shard server keeps every access key record; the
// newest version wins and a deleted key is a tombstone (Deleted, no secret)
// that keeps a late, older write from bringing it back.
type AccessKey struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Version Version   `json:"version"`
	Deleted bool      `json:"deleted,omitempty"`
	// SealedSecret is the secret key sealed by the gateway that created
	// it (AES-GCM under a key derived from the cluster secret), so the
	// shard servers never hold it in the clear. SigV4 needs the secret
	// itself to check a signature: a one-way hash cannot be stored.
	SealedSecret []byte `json:"sealed_secret,omitempty"`
	// Admin: the key may do everything, in every bucket, and use the
	// operator API (key management, drain, bucket codes, status).
	Admin bool `json:"admin,omitempty"`
	// CreateBuckets: the key may create buckets (and owns those it
	// creates).
	CreateBuckets bool `json:"create_buckets,omitempty"`
}

// PutAccessKey stores k if it is newer (by Version) than the stored record
// of its ID.
func (s *Store) PutAccessKey(ctx context.Context, k *AccessKey) (stored bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if k.ID == "" || k.Version.IsZero() {
		return false, fmt.Errorf("%w: %q needs an ID and a version", ErrInvalidAccessKey, k.ID)
	}
	if !k.Deleted && len(k.SealedSecret) == 0 {
		return false, fmt.Errorf("%w: %q has no secret", ErrInvalidAccessKey, k.ID)
	}
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	cur, err := s.getAccessKey(k.ID)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return false, err
	case !cur.Version.Less(k.Version):
		return false, nil
	}
	var flags byte
	if k.Deleted {
		flags = flagDeleted
	}
	val, err := encodeValue(flags, k)
	if err != nil {
		return false, err
	}
	if err := s.db.Set(accessKeyKey(k.ID), val, pebble.Sync); err != nil {
		return false, fmt.Errorf("metadata: put access key %s: %w", k.ID, err)
	}
	return true, nil
}

func (s *Store) getAccessKey(id string) (*AccessKey, error) {
	val, err := s.get(accessKeyKey(id))
	if err != nil {
		return nil, err
	}
	k := new(AccessKey)
	if err := decodeValue(val, k); err != nil {
		return nil, fmt.Errorf("%w: access key %s: %w", ErrCorruptRecord, id, err)
	}
	return k, nil
}

// ListAccessKeys returns every access key record in ID order, tombstones
// included (the caller merges several servers' lists; newest wins).
func (s *Store) ListAccessKeys(ctx context.Context) ([]AccessKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lo := []byte{nsKey}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixSuccessor(lo)})
	if err != nil {
		return nil, fmt.Errorf("metadata: list access keys: %w", err)
	}
	defer it.Close()
	var out []AccessKey
	for valid := it.First(); valid; valid = it.Next() {
		var k AccessKey
		if err := decodeValue(it.Value(), &k); err != nil {
			return nil, fmt.Errorf("%w: access key %q: %w", ErrCorruptRecord, it.Key()[1:], err)
		}
		out = append(out, k)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("metadata: list access keys: %w", err)
	}
	return out, nil
}

func accessKeyKey(id string) []byte {
	return append([]byte{nsKey}, id...)
}
