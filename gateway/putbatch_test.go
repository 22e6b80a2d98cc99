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
	"github.com/regen-s3/regen/metadata"
)

// gatedWrites is fakeManifests whose single manifest writes wait at gate
// (held in flight) while it is open, and which counts the calls of both
// kinds of manifest write.
type gatedWrites struct {
	*fakeManifests
	gate chan struct{}

	mu      sync.Mutex
	singles int
	batches map[string][]int // addr -> manifests in each batched call
}

func newGatedWrites(f *fakeManifests) *gatedWrites {
	return &gatedWrites{fakeManifests: f, gate: make(chan struct{}), batches: map[string][]int{}}
}

func (g *gatedWrites) PutManifestFenced(ctx context.Context, addr string, m *metadata.Manifest, lease string) (shardrpc.PutManifestResponse, error) {
	g.mu.Lock()
	g.singles++
	g.mu.Unlock()
	select {
	case <-g.gate:
	case <-ctx.Done():
		return shardrpc.PutManifestResponse{}, ctx.Err()
	}
	return g.fakeManifests.PutManifestFenced(ctx, addr, m, lease)
}

func (g *gatedWrites) PutManifestsFenced(ctx context.Context, addr string, ms []*metadata.Manifest, lease string) ([]shardrpc.PutResult, error) {
	g.mu.Lock()
	g.batches[addr] = append(g.batches[addr], len(ms))
	g.mu.Unlock()
	return g.fakeManifests.PutManifestsFenced(ctx, addr, ms, lease)
}

func (g *gatedWrites) calls() (singles, batched int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range g.batches {
		batched += len(b)
	}
	return g.singles, batched
}

// pending is how many writes wait for addr's call in flight under lease
// (-1: none is in flight).
func (b *manifestWrites) pendingFor(addr, lease string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.queues[writeTarget{addr, lease}]; q != nil && q.busy {
		return len(q.pending)
	}
	return -1
}

// waitFor polls cond (an observable state of the batcher) for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestManifestWritesBatchWhileBusy: a write that finds its server idle
// goes alone; those that arrive while it is in flight go together in one
// batched call, each with its own result (a write a newer version beat
// learns that version); once the server is idle again, a write goes
// alone at once.
func TestManifestWritesBatchWhileBusy(t *testing.T) {
	ctx := context.Background()
	f := newFakeManifests()
	gw := newGatedWrites(f)
	b := newManifestWrites(gw, time.Minute)
	const addr = "a0"
	ver := func(ts int64) metadata.Version { return metadata.Version{TS: ts, Writer: "gw"} }
	mk := func(key string, ts int64) *metadata.Manifest {
		return &metadata.Manifest{Bucket: "b", Key: key, Version: ver(ts), Code: "rs-6-3", Size: 1, Inline: []byte("x")}
	}
	f.store(addr, mk("beaten", 500)) // a newer write got there first

	writes := []*metadata.Manifest{mk("first", 100), mk("k1", 101), mk("k2", 102), mk("beaten", 103), mk("k3", 104)}
	results := make([]writeResult, len(writes))
	var wg sync.WaitGroup
	wg.Go(func() {
		res, err := b.put(ctx, addr, writes[0], shardrpc.NoLease)
		results[0] = writeResult{res, err}
	})
	waitFor(t, "the first write in flight", func() bool { return b.pendingFor(addr, shardrpc.NoLease) == 0 })
	for i := 1; i < len(writes); i++ {
		wg.Go(func() {
			res, err := b.put(ctx, addr, writes[i], shardrpc.NoLease)
			results[i] = writeResult{res, err}
		})
	}
	waitFor(t, "the others queued", func() bool { return b.pendingFor(addr, shardrpc.NoLease) == len(writes)-1 })
	close(gw.gate)
	wg.Wait()

	if singles, _ := gw.calls(); singles != 1 || !slices.Equal(gw.batches[addr], []int{len(writes) - 1}) {
		t.Errorf("%d single calls and batches %v, want 1 and one batch of %d", singles, gw.batches[addr], len(writes)-1)
	}
	for i, m := range writes {
		r := results[i]
		want := m.Version
		if m.Key == "beaten" {
			want = ver(500)
		}
		if r.err != nil || r.res.Current != want {
			t.Errorf("write of %s: %+v, %v; want current %s", m.Key, r.res, r.err, want)
		}
		if vs := f.versions(addr, "b", m.Key); !slices.ContainsFunc(vs, func(h *metadata.Manifest) bool { return h.Version == m.Version }) {
			t.Errorf("%s: version %s not on the server", m.Key, m.Version)
		}
	}

	waitFor(t, "the queue idle", func() bool { return b.pendingFor(addr, shardrpc.NoLease) == -1 })
	if _, err := b.put(ctx, addr, mk("alone", 200), shardrpc.NoLease); err != nil {
		t.Fatal(err)
	}
	if singles, batched := gw.calls(); singles != 2 || batched != 1 {
		t.Errorf("a write to an idle server: %d single and %d batched calls in all, want 2 and 1", singles, batched)
	}
}

// TestManifestWritesByLease: writes fenced by a held lease never share a
// call with writes fenced otherwise (the server checks one fence per
// call).
func TestManifestWritesByLease(t *testing.T) {
	ctx := context.Background()
	f := newFakeManifests()
	gw := newGatedWrites(f)
	b := newManifestWrites(gw, time.Minute)
	m := func(key string) *metadata.Manifest {
		return &metadata.Manifest{Bucket: "b", Key: key, Version: metadata.Version{TS: 1, Writer: "gw"}, Size: 1, Inline: []byte("x")}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { _, errs[0] = b.put(ctx, "a0", m("plain"), shardrpc.NoLease) })
	waitFor(t, "the unfenced write in flight", func() bool { return b.pendingFor("a0", shardrpc.NoLease) == 0 })
	wg.Go(func() { _, errs[1] = b.put(ctx, "a0", m("leased"), "holder-1") })
	// NB: it goes alone at once, held in flight at the gate like the
	// first, rather than queueing behind it.
	waitFor(t, "the fenced write in flight", func() bool { return b.pendingFor("a0", "holder-1") == 0 })
	if n := b.pendingFor("a0", shardrpc.NoLease); n != 0 {
		t.Errorf("%d writes queued behind the unfenced one, want 0", n)
	}
	close(gw.gate)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lease holder's queue forgotten", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queues) == 0
	})
}

// TestConcurrentPutsBatched: 64 concurrent small PUTs on 12 servers
// (rs-6-3, nine servers each) cost each server one single call and one
// batched call instead of one call per PUT, every PUT is stored on each
// of its servers, and a server whose batched call fails fails only the
// writes it carried: each of those PUTs still reaches its write quorum
// on its other eight servers.
func TestConcurrentPutsBatched(t *testing.T) {
	ctx := context.Background()
	g, f, _ := fakeCluster(t, 12)
	gw := newGatedWrites(f)
	g.layer.shards = gw
	g.layer.writes = newManifestWrites(gw, time.Minute)
	const bad = "a3"
	f.refuseBatch = map[string]bool{bad: true}

	const puts = 64
	ms := make([]*metadata.Manifest, puts)
	want := map[string]int{} // addr -> writes sent there
	for i := range ms {
		key := fmt.Sprintf("k%02d", i)
		order, _ := g.layer.manifestOrder("b", key)
		ms[i] = &metadata.Manifest{Bucket: "b", Key: key, Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("x"),
			Version: g.layer.clock.next()}
		for _, id := range order[:9] {
			want["a"+id[1:]]++
		}
	}
	stored := make([][]string, puts)
	errs := make([]error, puts)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			stored[i], errs[i] = g.layer.storeManifest(ctx, m, m.Placement, g.layer.writeQuorum(m), shardrpc.NoLease)
		})
	}
	waitFor(t, "every write in flight or queued", func() bool {
		for addr, n := range want {
			if g.layer.writes.pendingFor(addr, shardrpc.NoLease) != n-1 {
				return false
			}
		}
		return true
	})
	close(gw.gate)
	wg.Wait()

	singles, batched := gw.calls()
	if singles+batched > 2*len(want) {
		t.Errorf("%d single and %d batched calls for %d PUTs on %d servers, want at most 2 per server", singles, batched, puts, len(want))
	}
	for i, m := range ms {
		if errs[i] != nil {
			t.Errorf("%s: %v", m.Key, errs[i])
			continue
		}
		for _, id := range m.Placement {
			addr := "a" + id[1:]
			held := slices.ContainsFunc(f.versions(addr, "b", m.Key), func(h *metadata.Manifest) bool { return h.Version == m.Version })
			// The bad server stores only the one write it got alone.
			if addr != bad && !held {
				t.Errorf("%s: not on %s", m.Key, addr)
			}
			if slices.Contains(stored[i], addr) != held {
				t.Errorf("%s on %s: held %v, but counted stored %v", m.Key, addr, held, slices.Contains(stored[i], addr))
			}
		}
		if slices.Contains(m.Placement, "s3") && len(stored[i]) < 8 {
			t.Errorf("%s: stored on %v", m.Key, stored[i])
		}
	}
	if n := len(gw.batches[bad]); n != 1 {
		t.Errorf("%d batched calls to the failing server, want 1", n)
	}
}

// TestManifestWritesBatchBytes: a batched call carries at most
// maxBatchBytes of manifests, so that large inline objects never make a
// request the server refuses whole (it reads at most 64 MiB of one).
func TestManifestWritesBatchBytes(t *testing.T) {
	ctx := context.Background()
	f := newFakeManifests()
	gw := newGatedWrites(f)
	b := newManifestWrites(gw, time.Minute)
	const n, size = 100, 128 << 10
	var wg sync.WaitGroup
	errs := make([]error, n)
	put := func(i int) {
		m := &metadata.Manifest{Bucket: "b", Key: fmt.Sprintf("k%03d", i), Version: metadata.Version{TS: int64(i + 1), Writer: "gw"},
			Size: size, Inline: make([]byte, size)}
		_, errs[i] = b.put(ctx, "a0", m, shardrpc.NoLease)
	}
	wg.Go(func() { put(0) })
	waitFor(t, "the first write in flight", func() bool { return b.pendingFor("a0", shardrpc.NoLease) == 0 })
	for i := 1; i < n; i++ {
		wg.Go(func() { put(i) })
	}
	waitFor(t, "the others queued", func() bool { return b.pendingFor("a0", shardrpc.NoLease) == n-1 })
	close(gw.gate)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	per := maxBatchBytes / (size * 4 / 3)
	total := 0
	for _, c := range gw.batches["a0"] {
		total += c
		if c > per {
			t.Errorf("a batch of %d manifests of %d bytes inline, want at most %d", c, size, per)
		}
	}
	if total != n-1 || len(gw.batches["a0"]) < 2 {
		t.Errorf("batches %v, want %d manifests in several", gw.batches["a0"], n-1)
	}
}
