package metadata

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Multipart keys:
//
//	'u' esc(bucket) esc(key) uploadID   upload record
//	'r' esc(uploadID) number(4, BE)     part record of that upload
//
// Parts also get a part-index entry ('p', see store_keys.go) for their
// shard file ID under the upload's bucket/key, so the orphan sweep keeps
// their shard files while the upload is open and after it completes.
const (
	nsUpload     byte = 'u'
	nsUploadPart byte = 'r'
)

func uploadPrefix(bucket string) []byte { return bucketPrefix(nsUpload, bucket) }

func uploadKey(bucket, key, id string) []byte {
	return append(appendEscaped(uploadPrefix(bucket), key), id...)
}

func uploadPartPrefix(id string) []byte { return appendEscaped([]byte{nsUploadPart}, id) }

func uploadPartKey(id string, number int) []byte {
	return binary.BigEndian.AppendUint32(uploadPartPrefix(id), uint32(number))
}

// PutUpload stores an upload record. Storing the same upload again is a
// no-op, so retries are harmless.
func (s *Store) PutUpload(ctx context.Context, u *Upload) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := u.Validate(); err != nil {
		return err
	}
	val, err := encodeValue(0, u)
	if err != nil {
		return err
	}
	if err := s.db.Set(uploadKey(u.Bucket, u.Key, u.ID), val, pebble.Sync); err != nil {
		return fmt.Errorf("metadata: put upload %s: %w", u.ID, err)
	}
	return nil
}

// GetUpload returns the record of an open upload, or ErrNotFound.
func (s *Store) GetUpload(ctx context.Context, bucket, key, id string) (*Upload, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.getUpload(bucket, key, id)
}

func (s *Store) getUpload(bucket, key, id string) (*Upload, error) {
	val, err := s.get(uploadKey(bucket, key, id))
	if err != nil {
		return nil, err
	}
	u := new(Upload)
	if err := decodeValue(val, u); err != nil {
		return nil, fmt.Errorf("%w: upload %s: %w", ErrCorruptRecord, id, err)
	}
	return u, nil
}

// PutUploadPart stores part p of an open upload if it is newer than the
// stored record of its number. It returns the record that lost: the one
// replaced, or p itself when a newer one was stored; its shard files are
// garbage. It returns ErrNotFound when the upload is not open here.
func (s *Store) PutUploadPart(ctx context.Context, bucket, key string, p *UploadPart) (loser *UploadPart, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	unlock := s.lockKey(uploadKey(bucket, key, p.UploadID))
	defer unlock()
	if _, err := s.getUpload(bucket, key, p.UploadID); err != nil {
		return nil, err
	}
	cur, err := s.getUploadPart(p.UploadID, p.Number)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if cur != nil && !cur.Version.Less(p.Version) {
		if cur.Version == p.Version {
			return nil, nil // a retry of the stored write
		}
		return p, nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	val, err := encodeValue(0, p)
	if err != nil {
		return nil, err
	}
	if err := b.Set(uploadPartKey(p.UploadID, p.Number), val, nil); err != nil {
		return nil, fmt.Errorf("metadata: put part: %w", err)
	}
	if err := b.Set(partKey(p.ID, bucket, key), nil, nil); err != nil {
		return nil, fmt.Errorf("metadata: put part: %w", err)
	}
	if cur != nil && cur.ID != p.ID {
		if err := b.Delete(partKey(cur.ID, bucket, key), nil); err != nil {
			return nil, fmt.Errorf("metadata: put part: %w", err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, fmt.Errorf("metadata: put part %s/%d: %w", p.UploadID, p.Number, err)
	}
	return cur, nil
}

func (s *Store) getUploadPart(id string, number int) (*UploadPart, error) {
	val, err := s.get(uploadPartKey(id, number))
	if err != nil {
		return nil, err
	}
	p := new(UploadPart)
	if err := decodeValue(val, p); err != nil {
		return nil, fmt.Errorf("%w: part %s/%d: %w", ErrCorruptRecord, id, number, err)
	}
	return p, nil
}

// ListUploadParts returns the parts of an upload in part-number order.
func (s *Store) ListUploadParts(ctx context.Context, id string) ([]UploadPart, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pre := uploadPartPrefix(id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixSuccessor(pre)})
	if err != nil {
		return nil, fmt.Errorf("metadata: list parts: %w", err)
	}
	defer it.Close()
	var out []UploadPart
	for valid := it.First(); valid; valid = it.Next() {
		var p UploadPart
		if err := decodeValue(it.Value(), &p); err != nil {
			return nil, fmt.Errorf("%w: part of %s: %w", ErrCorruptRecord, id, err)
		}
		out = append(out, p)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("metadata: list parts: %w", err)
	}
	return out, nil
}

// FinishUpload removes an upload (completed or aborted) and its part
// records. Parts whose shard file ID is in keep, or that the key's current
// manifest here lists, stay referenced; the others are returned so the
// caller can delete their shard files. Finishing an upload that is not
// open returns ErrNotFound.
func (s *Store) FinishUpload(ctx context.Context, bucket, key, id string, keep []string) (*Upload, []UploadPart, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	unlock := s.lockKey(uploadKey(bucket, key, id))
	defer unlock()
	u, err := s.getUpload(bucket, key, id)
	if err != nil {
		return nil, nil, err
	}
	kept := make(map[string]bool, len(keep))
	for _, k := range keep {
		kept[k] = true
	}
	if m, err := s.getManifest(bucket, key); err == nil && !m.Deleted {
		for _, p := range m.Parts {
			kept[p.ID] = true
		}
	}
	parts, err := s.ListUploadParts(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	var dropped []UploadPart
	for _, p := range parts {
		if !kept[p.ID] {
			dropped = append(dropped, p)
			if err := b.Delete(partKey(p.ID, bucket, key), nil); err != nil {
				return nil, nil, fmt.Errorf("metadata: finish upload: %w", err)
			}
		}
	}
	pre := uploadPartPrefix(id)
	if err := b.DeleteRange(pre, prefixSuccessor(pre), nil); err != nil {
		return nil, nil, fmt.Errorf("metadata: finish upload: %w", err)
	}
	if err := b.Delete(uploadKey(bucket, key, id), nil); err != nil {
		return nil, nil, fmt.Errorf("metadata: finish upload: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return nil, nil, fmt.Errorf("metadata: finish upload %s: %w", id, err)
	}
	return u, dropped, nil
}

// ListUploads returns up to q.Limit open uploads of q.Bucket in (key,
// upload ID) order, and whether more follow.
func (s *Store) ListUploads(ctx context.Context, q UploadQuery) ([]Upload, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if q.Bucket == "" {
		return nil, false, fmt.Errorf("%w: no bucket", ErrInvalidQuery)
	}
	if q.Limit <= 0 || q.Limit > MaxListLimit {
		q.Limit = DefaultListLimit
	}
	return s.scanUploads(uploadPrefix(q.Bucket), q.Limit, func(u *Upload) bool {
		if len(u.Key) < len(q.Prefix) || u.Key[:len(q.Prefix)] != q.Prefix {
			return false
		}
		switch {
		case u.Key < q.KeyMarker:
			return false
		case u.Key == q.KeyMarker:
			return q.IDMarker != "" && u.ID > q.IDMarker
		}
		return true
	})
}

// ExpiredUploads returns up to limit open uploads, of any bucket,
// initiated before cutoff.
func (s *Store) ExpiredUploads(ctx context.Context, cutoff time.Time, limit int) ([]Upload, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, _, err := s.scanUploads([]byte{nsUpload}, limit, func(u *Upload) bool { return u.Initiated.Before(cutoff) })
	return out, err
}

// CountUploads returns how many multipart uploads are open on this node
// (it holds the record of every upload whose placement names it).
func (s *Store) CountUploads(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	pre := []byte{nsUpload}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixSuccessor(pre)})
	if err != nil {
		return 0, fmt.Errorf("metadata: count uploads: %w", err)
	}
	defer it.Close()
	var n int64
	for valid := it.First(); valid; valid = it.Next() {
		n++
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("metadata: count uploads: %w", err)
	}
	return n, nil
}

// scanUploads walks upload records under pre, keeping those match
// accepts, until limit are found.
func (s *Store) scanUploads(pre []byte, limit int, match func(*Upload) bool) ([]Upload, bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixSuccessor(pre)})
	if err != nil {
		return nil, false, fmt.Errorf("metadata: list uploads: %w", err)
	}
	defer it.Close()
	var out []Upload
	for valid := it.First(); valid; valid = it.Next() {
		var u Upload
		if err := decodeValue(it.Value(), &u); err != nil {
			return nil, false, fmt.Errorf("%w: upload %q: %w", ErrCorruptRecord, it.Key(), err)
		}
		if !match(&u) {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, u)
	}
	if err := it.Error(); err != nil {
		return nil, false, fmt.Errorf("metadata: list uploads: %w", err)
	}
	return out, false, nil
}
