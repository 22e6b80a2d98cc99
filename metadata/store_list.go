package metadata

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Listing limits.
const (
	// DefaultListLimit is used when ListQuery.Limit is zero or negative.
	DefaultListLimit = 1000
	// MaxListLimit caps ListQuery.Limit, bounding one call's work and reply.
	MaxListLimit = 10000
)

// ListQuery selects keys of one bucket, in byte order.
type ListQuery struct {
	Bucket string `json:"bucket"`
	// Prefix restricts the listing to keys starting with it.
	Prefix string `json:"prefix,omitempty"`
	// Delimiter, when set, collapses the keys that contain it after Prefix
	// into one common-prefix entry (Prefix up to and including the first
	// Delimiter).
	Delimiter string `json:"delimiter,omitempty"`
	// After: only entries (keys or common prefixes) strictly greater than
	// After are returned. Pass the last entry of the previous page.
	After string `json:"after,omitempty"`
	// Limit counts entries, keys and common prefixes alike. Zero or
	// negative means DefaultListLimit; larger than MaxListLimit is capped.
	Limit int `json:"limit,omitempty"`
	// Unsure also lists, with a delimiter, a common prefix with no live
	// key here but a key whose current version is a tombstone over
	// previous versions (a delete not yet confirmed on a write quorum, or
	// one that failed), as an entry with Prefix and Deleted set. A
	// gateway that asked only some servers learns from it that the
	// others must be asked before the prefix is left out (see
	// gateway.layer.list). Without Unsure no such entry is sent, so
	// gateways that do not know it never see one.
	Unsure bool `json:"unsure,omitempty"`
}

// List returns up to q.Limit entries of q.Bucket and whether more follow.
//
// Tombstones are listed as keys (Deleted set) because the caller merges the
// listings of several servers and the newest version of a key wins there. A
// common prefix is emitted only when this server holds at least one live key
// under it, so deleted "directories" disappear (or, with q.Unsure, marked
// Deleted when a key under it has an unconfirmed tombstone); its subtree is
// then skipped with one seek rather than scanned.
func (s *Store) List(ctx context.Context, q ListQuery) ([]ListEntry, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if q.Bucket == "" {
		return nil, false, fmt.Errorf("%w: empty bucket", ErrInvalidQuery)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)

	base := bucketPrefix(nsManifest, q.Bucket)
	lower := append(bytes.Clone(base), q.Prefix...)
	upper := prefixSuccessor(lower) // never nil: base ends in 0x01
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, false, fmt.Errorf("metadata: list: %w", err)
	}
	defer it.Close()

	start := lower
	if q.After >= q.Prefix {
		// The smallest key strictly greater than After is After+"\x00".
		start = append(append(bytes.Clone(base), q.After...), 0)
	}
	var (
		out       []ListEntry
		truncated bool
		steps     int
	)
	// emit appends e unless the page is full, in which case it reports that
	// the listing is truncated and stops it.
	emit := func(e ListEntry) bool {
		if len(out) == limit {
			truncated = true
			return false
		}
		out = append(out, e)
		return true
	}
	for valid := it.SeekGE(start); valid; {
		if steps++; steps%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
		}
		key := it.Key()[len(base):]
		if q.Delimiter != "" {
			if i := bytes.Index(key[len(q.Prefix):], []byte(q.Delimiter)); i >= 0 {
				cp := string(key[:len(q.Prefix)+i+len(q.Delimiter)])
				// NB: cp is a prefix of the keys under it, so it sorts before
				// them; when cp <= After the common prefix was already
				// listed (After is cp itself or a key inside it).
				if cp > q.After {
					live, unsure, err := s.liveUnder(it, base, cp)
					if err != nil {
						return nil, false, err
					}
					if (live || unsure && q.Unsure) && !emit(ListEntry{Prefix: cp, Deleted: !live}) {
						break
					}
				}
				next := prefixSuccessor(append(bytes.Clone(base), cp...))
				valid = it.SeekGE(next)
				continue
			}
		}
		e, err := s.listEntry(q.Bucket, string(key), it.Value())
		if err != nil {
			return nil, false, err
		}
		if !emit(e) {
			break
		}
		valid = it.Next()
	}
	if err := it.Error(); err != nil {
		return nil, false, fmt.Errorf("metadata: list: %w", err)
	}
	return out, truncated, nil
}

// liveUnder reports whether a live key with prefix cp exists, scanning from
// the iterator's position (the first key under cp), and, when none does,
// whether one of the tombstones under cp has previous versions under it
// (unsure: see ListQuery.Unsure). It moves the iterator.
func (s *Store) liveUnder(it *pebble.Iterator, base []byte, cp string) (live, unsure bool, err error) {
	for valid := true; valid; valid = it.Next() {
		k := it.Key()[len(base):]
		if !strings.HasPrefix(string(k), cp) {
			return false, unsure, nil
		}
		v := it.Value()
		if len(v) < 2 {
			return false, false, fmt.Errorf("%w: key %q", ErrCorruptRecord, k)
		}
		if v[1]&flagDeleted == 0 {
			return true, false, nil
		}
		unsure = unsure || v[1]&flagPrevious != 0
	}
	return false, unsure, it.Error()
}

// listEntry summarises the current manifest value val of key, with the
// key's previous versions when it has any.
func (s *Store) listEntry(bucket, key string, val []byte) (ListEntry, error) {
	e, err := decodeSummary(key, val)
	if err != nil {
		return ListEntry{}, fmt.Errorf("%w: manifest %q: %w", ErrCorruptRecord, key, err)
	}
	if val[1]&flagPrevious != 0 {
		if e.Previous, err = s.previousEntries(bucket, key); err != nil {
			return ListEntry{}, err
		}
	}
	return e, nil
}

// listFields are the manifest fields a listing row shows. A listing
// decodes the manifest of every key it passes on every server that holds
// it; decoding into this instead of a Manifest skips the placement, the
// parts with their shard checksums, the user metadata and the headers
// (most of a manifest's bytes) without building them.
type listFields struct {
	Version      Version   `json:"version"`
	Deleted      bool      `json:"deleted"`
	Size         int64     `json:"size"`
	ETag         string    `json:"etag"`
	StorageClass string    `json:"storage_class"`
	Modified     time.Time `json:"modified"`
	Code         string    `json:"code"`
	VersionID    string    `json:"version_id"`
}

// decodeSummary is the listing row of key from a manifest value (current
// or previous): the listFields of the manifest it encodes.
func decodeSummary(key string, val []byte) (ListEntry, error) {
	var f listFields
	if err := decodeValue(val, &f); err != nil {
		return ListEntry{}, err
	}
	return ListEntry{
		Key:          key,
		Version:      f.Version,
		Deleted:      f.Deleted,
		Size:         f.Size,
		ETag:         f.ETag,
		StorageClass: f.StorageClass,
		Modified:     f.Modified,
		Code:         f.Code,
		VersionID:    f.VersionID,
	}, nil
}
