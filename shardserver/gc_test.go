package shardserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (e *testEnv) exists(t *testing.T, id string, idx int) bool {
	t.Helper()
	_, err := e.client.StatShard(context.Background(), e.addr, id, idx)
	if err != nil && !errors.Is(err, shardrpc.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func TestGCOfReplacedShardsAfterDelay(t *testing.T) {
	const delay = time.Minute
	e := newEnv(t, func(c *Config) { c.GCDelay = delay })
	e.healthyPeers()
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	e.srv.now = clock.now
	ctx := context.Background()
	putManifest := func(ts int64, part string, deleted bool) {
		t.Helper()
		m := manifest("b", "k", ts, part)
		if deleted {
			m = tombstone("b", "k", ts)
		}
		if _, _, err := e.client.PutManifest(ctx, e.addr, m); err != nil {
			t.Fatal(err)
		}
	}
	collect := func(want int) {
		t.Helper()
		if _, err := e.srv.runConfirms(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := e.srv.collectGarbage(ctx)
		if err != nil || n != want {
			t.Fatalf("collectGarbage = %d, %v; want %d", n, err, want)
		}
	}
	for _, id := range []string{"p1", "p2", "p0"} {
		e.put(t, id, 1, []byte("shard of "+id)) // this node is shard 1 of every manifest here
	}
	e.put(t, "p1", 0, []byte("not ours by placement"))

	putManifest(10, "p1", false)
	putManifest(20, "p2", false) // replaces p1
	collect(0)                   // not due yet: a GET of v10 may still be reading p1
	if !e.exists(t, "p1", 1) {
		t.Fatal("p1 deleted before GCDelay")
	}
	clock.advance(delay + time.Second)
	collect(1)
	if e.exists(t, "p1", 1) || !e.exists(t, "p2", 1) || !e.exists(t, "p1", 0) {
		t.Fatal("want p1.1 deleted; p2.1 (current) and p1.0 (never ours) kept")
	}

	// A late, older manifest loses; its shards are garbage too.
	putManifest(5, "p0", false)
	// A tombstone replaces the current version.
	putManifest(30, "", true)
	clock.advance(delay + time.Second)
	collect(2)
	if e.exists(t, "p0", 1) || e.exists(t, "p2", 1) {
		t.Fatal("want p0.1 and p2.1 deleted")
	}
	// The queue is empty now.
	collect(0)

	// A queued shard that a current manifest claims again is kept.
	e.put(t, "p9", 1, []byte("claimed"))
	putManifest(40, "p9", false)
	if err := e.srv.meta.EnqueueGC(ctx, "p9", 1, clock.now()); err != nil {
		t.Fatal(err)
	}
	collect(0)
	if !e.exists(t, "p9", 1) {
		t.Fatal("a shard of the current manifest was deleted")
	}
	if due, _ := e.srv.meta.DueGC(ctx, clock.now().Add(time.Hour), 10); len(due) != 0 {
		t.Fatalf("queue not drained: %+v", due)
	}
}

func TestRunLoopCollects(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.GCDelay = 0
		c.GCInterval = 5 * time.Millisecond
	})
	e.healthyPeers()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(ctx) }()
	e.put(t, "r1", 1, []byte("old"))
	for ts, part := range []string{"r1", "r2"} {
		if _, _, err := e.client.PutManifest(ctx, e.addr, manifest("b", "k", int64(ts+1), part)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.exists(t, "r1", 1) {
		if time.Now().After(deadline) {
			t.Fatal("Run never collected the replaced shard")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
}

func TestOrphanSweep(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.put(t, "orphan", 0, []byte("no manifest"))
	e.put(t, "kept", 1, []byte("has a manifest"))
	e.put(t, "young", 0, []byte("no manifest yet"))
	if _, _, err := e.client.PutManifest(ctx, e.addr, manifest("b", "k", 1, "kept")); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(e.srv.shards.dir("dead"), tmpPrefix+"dead.0.abc")
	os.MkdirAll(filepath.Dir(tmp), 0o755)
	if err := os.WriteFile(tmp, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-e.srv.cfg.OrphanAge - time.Hour)
	for _, p := range []string{e.srv.shards.path("orphan", 0), e.srv.shards.path("kept", 1), tmp} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	n, err := e.srv.sweepOrphans(ctx)
	if err != nil || n != 2 {
		t.Fatalf("sweepOrphans = %d, %v; want 2 (orphan and temp)", n, err)
	}
	if e.exists(t, "orphan", 0) || !e.exists(t, "kept", 1) || !e.exists(t, "young", 0) {
		t.Fatal("want orphan deleted, kept and young kept")
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old temp file left: %v", err)
	}
}

func TestGarbageIsPlacementAware(t *testing.T) {
	old := manifest("b", "k", 1, "p")
	moved := manifest("b", "k", 2, "p")
	// Repair moved this node's shard 1 elsewhere: same part, new placement.
	moved.Placement = []string{"aaaaaaaaaaaaaaaa", "cccccccccccccccc", "bbbbbbbbbbbbbbbb"}
	if g := garbage(old, moved, testNode); len(g) != 1 || g[0] != (shardRef{"p", 1}) {
		t.Fatalf("moved away: garbage %v", g)
	}
	if g := garbage(old, manifest("b", "k", 3, "p"), testNode); len(g) != 0 {
		t.Fatalf("same part, same place: garbage %v", g)
	}
	if g := garbage(nil, old, testNode); len(g) != 0 {
		t.Fatalf("nothing replaced: garbage %v", g)
	}
}
