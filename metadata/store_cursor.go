package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Walk positions.
//
// A background walk over every manifest (the scrubber reads every shard
// at a few MB/s: a pass over a large server takes weeks) saves where it is
// now and then, so that a restart resumes it instead of starting the pass
// over. The position is this server's own state: it is not replicated and
// losing it only repeats work, so it is written without a sync.
//
// Keys (namespace 'l' is unused elsewhere, see store_keys.go):
//
//	'l' name                       a walk's cursor (JSON Cursor)
const nsLocal byte = 'l'

// Cursor is a position in the manifest walk: the walk resumes with the
// first key after (Bucket, Key). With Version set it is a position in the
// walk over noncurrent versions (EachVersionAfter): the walk resumes with
// the first version after that version of (Bucket, Key).
type Cursor struct {
	Bucket  string   `json:"bucket"`
	Key     string   `json:"key"`
	Version *Version `json:"version,omitempty"`
}

// String is "bucket/key" or "bucket/key@version", for logs.
func (c *Cursor) String() string {
	if c.Version != nil {
		return c.Bucket + "/" + c.Key + "@" + c.Version.String()
	}
	return c.Bucket + "/" + c.Key
}

// EachManifestAfter is EachManifest starting with the first key after
// after (from the start when after is nil).
func (s *Store) EachManifestAfter(ctx context.Context, after *Cursor, fn func(*Manifest) error) error {
	return s.eachManifestAfter(ctx, after, flagDeleted, fn)
}

// EachStripedAfter is EachManifestAfter over the objects with shards only:
// inline objects (their data is in the manifest) are left out by their
// flag, before decoding. It is the scrubber's walk: a server holding a
// million small objects has nothing of theirs to verify, and decoding
// every manifest on every pass was most of an idle cluster's CPU.
func (s *Store) EachStripedAfter(ctx context.Context, after *Cursor, fn func(*Manifest) error) error {
	return s.eachManifestAfter(ctx, after, flagDeleted|flagsInline, fn)
}

func (s *Store) eachManifestAfter(ctx context.Context, after *Cursor, skip byte, fn func(*Manifest) error) error {
	lo := []byte{nsManifest}
	hi := prefixSuccessor(lo)
	if after != nil {
		// NB: key+"\x00" is the smallest key after key, and the object key
		// is the last component of a manifest key (store_keys.go).
		lo = append(manifestKey(after.Bucket, after.Key), 0)
	}
	return s.eachManifestIn(ctx, lo, hi, skip, fn)
}

// SaveCursor stores the walk name's position; nil removes it (the walk
// starts over).
func (s *Store) SaveCursor(ctx context.Context, name string, c *Cursor) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k := append([]byte{nsLocal}, name...)
	if c == nil {
		if err := s.db.Delete(k, pebble.NoSync); err != nil {
			return fmt.Errorf("metadata: clear cursor %s: %w", name, err)
		}
		return nil
	}
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := s.db.Set(k, v, pebble.NoSync); err != nil {
		return fmt.Errorf("metadata: save cursor %s: %w", name, err)
	}
	return nil
}

// LoadCursor returns the walk name's saved position, nil when it has none.
func (s *Store) LoadCursor(ctx context.Context, name string) (*Cursor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, closer, err := s.db.Get(append([]byte{nsLocal}, name...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metadata: load cursor %s: %w", name, err)
	}
	defer closer.Close()
	c := new(Cursor)
	if err := json.Unmarshal(v, c); err != nil {
		return nil, fmt.Errorf("%w: cursor %s: %w", ErrCorruptRecord, name, err)
	}
	return c, nil
}
