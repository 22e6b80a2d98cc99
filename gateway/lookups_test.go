package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// TestLookupsBatchWhileBusy: a lookup that finds its server idle goes
// alone; the lookups that arrive while it is in flight go together in
// one batched call, each with its own answer (found, marked, or none).
func TestLookupsBatchWhileBusy(t *testing.T) {
	ctx := context.Background()
	g, f, _ := fakeCluster(t, 12)
	for _, k := range []string{"a", "b", "c"} {
		m := putFake(g, f, "bk", k)
		if k == "b" {
			markFake(f, m)
		}
	}
	// A server that holds all three.
	var addr string
	for i := range 12 {
		id := fmt.Sprintf("s%d", i)
		all := true
		for _, k := range []string{"a", "b", "c"} {
			order, _ := g.layer.manifestOrder("bk", k)
			all = all && slices.Contains(order[:9], id)
		}
		if all {
			addr = fmt.Sprintf("a%d", i)
			break
		}
	}
	b := newLookups(f, time.Minute)
	f.lookupGate = make(chan struct{})

	type answer struct {
		res shardrpc.ManifestVersionsResponse
		err error
	}
	keys := []string{"a", "b", "c", "never-written"}
	answers := make([]answer, len(keys))
	var wg sync.WaitGroup
	wg.Go(func() { // the first goes alone, and is held in flight
		res, err := b.lookup(ctx, addr, "bk", keys[0])
		answers[0] = answer{res, err}
	})
	pending := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		if q := b.queues[addr]; q != nil && q.busy {
			return len(q.pending)
		}
		return -1
	}
	for pending() < 0 {
		time.Sleep(time.Millisecond)
	}
	for i := 1; i < len(keys); i++ {
		wg.Go(func() {
			res, err := b.lookup(ctx, addr, "bk", keys[i])
			answers[i] = answer{res, err}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); pending() < len(keys)-1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d lookups queued, want %d", pending(), len(keys)-1)
		}
		time.Sleep(time.Millisecond)
	}
	close(f.lookupGate)
	wg.Wait()
	if f.batches != 1 {
		t.Errorf("%d batched calls, want 1 for the three that waited", f.batches)
	}
	for i, k := range keys[:3] {
		a := answers[i]
		if a.err != nil || a.res.Current == nil || a.res.Current.Key != k || a.res.Committed != (k == "b") {
			t.Errorf("%s: %+v, %v", k, a.res, a.err)
		}
	}
	if err := answers[3].err; !errors.Is(err, shardrpc.ErrNotFound) {
		t.Errorf("never written: %v, want not found", err)
	}
	// NB: the drain that answered the batch marks the queue idle just
	// after, on its own goroutine: wait for that, with a bound.
	for deadline := time.Now().Add(10 * time.Second); pending() != -1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server's queue is still busy 10 s after every lookup was answered")
		}
	}
	res, err := b.lookup(ctx, addr, "bk", "a")
	if err != nil || res.Current == nil {
		t.Fatalf("a lookup after the batch: %v, %v", res, err)
	}
	if f.batches != 1 {
		t.Errorf("a lookup of an idle server was batched")
	}
}
