package metadata

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// A job queued due earlier than the jobs a scan already passed (a clock
// stepped back, a retry due at once) is found: writes lower the floor.
func TestQueueFloorFindsEarlierJobs(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	t0 := time.Unix(1_700_000_000, 0)
	now := t0.Add(time.Hour)

	late := ConfirmJob{Bucket: "b", Key: "late", Version: ver(2), Due: t0.Add(time.Minute)}
	if err := s.EnqueueConfirm(ctx, late); err != nil {
		t.Fatal(err)
	}
	got, err := s.DueConfirms(ctx, now, 64)
	if err != nil || len(got) != 1 {
		t.Fatalf("DueConfirms = %v, %v; want the late job", got, err)
	}
	if err := s.DoneConfirms(ctx, got, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DueConfirms(ctx, now, 64); err != nil { // raises the floor to the scan's bound
		t.Fatal(err)
	}
	early := ConfirmJob{Bucket: "b", Key: "early", Version: ver(1), Due: t0}
	if err := s.EnqueueConfirm(ctx, early); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DueConfirms(ctx, now, 64); err != nil || len(got) != 1 || got[0].Key != "early" {
		t.Fatalf("DueConfirms after an earlier job was queued = %v, %v", got, err)
	}

	// The same for the garbage and tombstone queues.
	if err := s.EnqueueGC(ctx, "f-late", 1, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	items, err := s.DueGC(ctx, now, 64)
	if err != nil || len(items) != 1 {
		t.Fatalf("DueGC = %v, %v", items, err)
	}
	if err := s.DoneGC(ctx, items...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DueGC(ctx, now, 64); err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueGC(ctx, "f-early", 1, t0); err != nil {
		t.Fatal(err)
	}
	if items, err := s.DueGC(ctx, now, 64); err != nil || len(items) != 1 || items[0].FileID != "f-early" {
		t.Fatalf("DueGC after an earlier item was queued = %v, %v", items, err)
	}

	if err := s.EnqueueTombstone(ctx, TombstoneJob{Bucket: "b", Key: "late", Version: ver(2), Due: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	tj, err := s.DueTombstones(ctx, now, 64)
	if err != nil || len(tj) != 1 {
		t.Fatalf("DueTombstones = %v, %v", tj, err)
	}
	if err := s.DoneTombstones(ctx, tj, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DueTombstones(ctx, now, 64); err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueTombstone(ctx, TombstoneJob{Bucket: "b", Key: "early", Version: ver(1), Due: t0}); err != nil {
		t.Fatal(err)
	}
	if tj, err := s.DueTombstones(ctx, now, 64); err != nil || len(tj) != 1 || tj[0].Key != "early" {
		t.Fatalf("DueTombstones after an earlier job was queued = %v, %v", tj, err)
	}
}

// Scans start past the jobs already done: the floor follows the queue's
// front, so a scan does not step over their deletions again.
func TestQueueFloorFollowsFront(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	t0 := time.Unix(1_700_000_000, 0)
	var last ConfirmJob
	for i := range 500 {
		last = ConfirmJob{Bucket: "b", Key: fmt.Sprintf("k%04d", i), Version: ver(1), Due: t0.Add(time.Duration(i) * time.Millisecond)}
		if err := s.EnqueueConfirm(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	pending := ConfirmJob{Bucket: "b", Key: "pending", Version: ver(1), Due: t0.Add(time.Hour)}
	if err := s.EnqueueConfirm(ctx, pending); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Minute)
	for {
		got, err := s.DueConfirms(ctx, now, 64)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		if err := s.DoneConfirms(ctx, got, nil); err != nil {
			t.Fatal(err)
		}
	}
	s.confirmFloor.mu.Lock()
	floor := bytes.Clone(s.confirmFloor.key)
	s.confirmFloor.mu.Unlock()
	if bytes.Compare(floor, confirmKey(last)) <= 0 {
		t.Fatalf("floor %q is not past the last job done %q", floor, confirmKey(last))
	}
	if got, err := s.DueConfirms(ctx, t0.Add(2*time.Hour), 64); err != nil || len(got) != 1 || got[0].Key != "pending" {
		t.Fatalf("DueConfirms later = %v, %v; want the pending job", got, err)
	}
}

// Jobs queued while scans run, due before or after what the scans
// passed, are all found: none falls below a floor a scan raised.
func TestQueueFloorConcurrentWrites(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	t0 := time.Unix(1_700_000_000, 0)
	now := t0.Add(time.Hour)
	const writers, each = 4, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range each {
				j := ConfirmJob{Bucket: "b", Key: fmt.Sprintf("w%d-%d", w, i), Version: ver(1),
					Due: t0.Add(time.Duration(r.IntN(3_600_000)) * time.Millisecond)}
				if err := s.EnqueueConfirm(ctx, j); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	seen := map[string]bool{}
	take := func() int {
		got, err := s.DueConfirms(ctx, now, 16)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range got {
			if seen[j.Key] {
				t.Fatalf("job %s returned after it was done", j.Key)
			}
			seen[j.Key] = true
		}
		if err := s.DoneConfirms(ctx, got, nil); err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			take()
		}
	}
	for take() > 0 {
	}
	if len(seen) != writers*each {
		t.Fatalf("found %d jobs of %d queued", len(seen), writers*each)
	}
}

// A scan up to an earlier time than the last (the clock stepped back)
// finds nothing below the floor and fails nothing; a job queued due
// earlier still is found.
func TestQueueFloorClockBack(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	t0 := time.Unix(1_700_000_000, 0)
	if got, err := s.DueConfirms(ctx, t0, 64); err != nil || len(got) != 0 {
		t.Fatalf("DueConfirms on an empty queue = %v, %v", got, err)
	}
	if got, err := s.DueConfirms(ctx, t0.Add(-time.Hour), 64); err != nil || len(got) != 0 {
		t.Fatalf("DueConfirms an hour earlier = %v, %v", got, err)
	}
	j := ConfirmJob{Bucket: "b", Key: "k", Version: ver(1), Due: t0.Add(-2 * time.Hour)}
	if err := s.EnqueueConfirm(ctx, j); err != nil {
		t.Fatal(err)
	}
	if got, err := s.DueConfirms(ctx, t0.Add(-time.Hour), 64); err != nil || len(got) != 1 {
		t.Fatalf("DueConfirms after a job due earlier = %v, %v", got, err)
	}
}
