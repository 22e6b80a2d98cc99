package metadata

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// GCItem is one queued deletion: shard file Idx of part FileID, due at Due.
type GCItem struct {
	FileID string    `json:"file_id"`
	Idx    int       `json:"idx"`
	Due    time.Time `json:"due"`
}

// EnqueueGC durably queues the deletion of shard file idx of fileID, to run
// no earlier than due. Enqueuing the same file twice is harmless: the
// deleter re-checks ownership and deletion is idempotent.
func (s *Store) EnqueueGC(ctx context.Context, fileID string, idx int, due time.Time) error {
	return s.EnqueueGCs(ctx, []GCItem{{FileID: fileID, Idx: idx, Due: due}})
}

// EnqueueGCs is EnqueueGC for many shard files, in one synced batch.
func (s *Store) EnqueueGCs(ctx context.Context, items []GCItem) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	keys := make([][]byte, len(items))
	for i, it := range items {
		if it.FileID == "" || it.Idx < 0 {
			return fmt.Errorf("metadata: enqueue GC: bad shard %q.%d", it.FileID, it.Idx)
		}
		keys[i] = gcKey(it)
		if err := b.Set(keys[i], nil, nil); err != nil {
			return fmt.Errorf("metadata: enqueue GC: %w", err)
		}
	}
	err := b.Commit(pebble.Sync)
	s.gcFloor.wrote(keys...) // NB: after the commit, failed or not (queueFloor.wrote)
	if err != nil {
		return fmt.Errorf("metadata: enqueue GC of %d shard files: %w", len(items), err)
	}
	return nil
}

// DueGC returns up to limit queued items due at or before now, oldest first.
// They stay queued until DoneGC, so a crash between deleting a file and
// DoneGC only repeats an idempotent delete.
func (s *Store) DueGC(ctx context.Context, now time.Time, limit int) ([]GCItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	lo := []byte{nsGC}
	// Every key of an item due at or before now is below this bound.
	hi := binary.BigEndian.AppendUint64([]byte{nsGC}, uint64(now.UnixNano())+1)
	var out []GCItem
	err := s.scanQueue(&s.gcFloor, lo, hi, func(k, _ []byte) (bool, error) {
		item, err := parseGCKey(k)
		if err != nil {
			return false, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
		}
		out = append(out, item)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("metadata: due GC: %w", err)
	}
	return out, nil
}

// DoneGC removes items from the queue.
func (s *Store) DoneGC(ctx context.Context, items ...GCItem) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, it := range items {
		if err := b.Delete(gcKey(it), nil); err != nil {
			return fmt.Errorf("metadata: done GC: %w", err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("metadata: done GC: %w", err)
	}
	return nil
}
