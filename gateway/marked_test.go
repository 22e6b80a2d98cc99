package gateway

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// TestMarkedLookup: marks committed change nothing a lookup answers, nor
// how many servers it asks: k votes decide (the shortcut that answered
// from four agreeing servers, one marked, went with chaos seed 8383).
func TestMarkedLookup(t *testing.T) {
	ctx := context.Background()
	t.Run("a newer write in flight on one of the first four", func(t *testing.T) {
		g, f, _ := fakeCluster(t, 12)
		acked := putFake(g, f, "b", "k")
		markFake(f, acked)
		landNewerOn(g, f, "b", "k", 0, 1)
		f.calls = 0
		m, err := g.layer.readHead(ctx, "b", "k")
		if err != nil || m.Version != acked.Version {
			t.Fatalf("read %v, %v; want the acknowledged %v (the newer one is on one server)", m, err, acked.Version)
		}
		if f.calls != 6 {
			t.Errorf("%d calls, want 6: the answers differ, so k votes decide", f.calls)
		}
	})
	t.Run("a server of the first four missed the write", func(t *testing.T) {
		g, f, _ := fakeCluster(t, 12)
		acked := putFake(g, f, "b", "k", 0)
		markFake(f, acked)
		f.calls = 0
		m, err := g.layer.readHead(ctx, "b", "k")
		if err != nil || m.Version != acked.Version {
			t.Fatalf("read %v, %v", m, err)
		}
		if f.calls != 9 {
			t.Errorf("%d calls, want 9 (k votes, of the first nine)", f.calls)
		}
	})
	t.Run("a marked delete", func(t *testing.T) {
		g, f, _ := fakeCluster(t, 12)
		m := putFake(g, f, "b", "k")
		tomb := g.layer.tombstone(m)
		if err := g.layer.writeManifest(ctx, tomb, tomb.Placement, 7, shardrpc.NoLease); err != nil {
			t.Fatal(err)
		}
		markFake(f, tomb)
		f.calls = 0
		if _, err := g.layer.readHead(ctx, "b", "k"); err != errNotFound {
			t.Fatalf("read after a marked delete: %v, want not found", err)
		}
		if f.calls != 6 {
			t.Errorf("%d calls, want 6", f.calls)
		}
	})
	t.Run("a version removed by ID while two servers missed it", func(t *testing.T) {
		// The two keep it as their current version, marked: the mark
		// must not bring it back over the removal a write quorum made.
		g, f, _ := fakeCluster(t, 12)
		order, _ := g.layer.manifestOrder("b", "k")
		older := &metadata.Manifest{Bucket: "b", Key: "k", Versioned: true, Version: g.layer.clock.next(),
			Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("o")}
		newer := &metadata.Manifest{Bucket: "b", Key: "k", Versioned: true, Version: g.layer.clock.next(),
			Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("n")}
		for _, m := range []*metadata.Manifest{older, newer} {
			if err := g.layer.writeManifest(ctx, m, order[:9], 7, shardrpc.NoLease); err != nil {
				t.Fatal(err)
			}
		}
		markFake(f, newer)
		f.refuse = map[string]bool{"a" + order[0][1:]: true, "a" + order[1][1:]: true}
		if _, err := g.layer.deleteVersion(ctx, "b", "k", newer.Version.String()); err != nil {
			t.Fatalf("removal of the newer version on 7 of 9: %v", err)
		}
		f.refuse = nil
		m, err := g.layer.readHead(ctx, "b", "k")
		if err != nil || m.Version != older.Version {
			t.Fatalf("read %v, %v; want the older version %v: the newer one was removed", m, err, older.Version)
		}
	})
}

// TestWritesNoticeConfirmed: a write that reached its quorum is noticed
// to every server that stored it with PathConfirmed (the servers' confirm
// notes use it), never with PathCommitted (which made servers write a
// mark nobody reads), and the next lookup of the key asks k servers, as
// for any healthy key.
func TestWritesNoticeConfirmed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, f, _ := fakeCluster(t, 12)
	g.layer.notify = newNotifier(f)
	go g.layer.notify.run(ctx)
	order, _ := g.layer.manifestOrder("b", "k")
	m := &metadata.Manifest{Bucket: "b", Key: "k", Code: "rs-6-3", Placement: order[:9], Size: 1, Inline: []byte("x")}
	if err := g.commit(ctx, m, m.Placement, 7, nil); err != nil {
		t.Fatal(err)
	}
	want := shardrpc.VersionRef{Bucket: "b", Key: "k", Version: m.Version}
	noticed := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for _, id := range order[:9] {
			if slices.Contains(f.noticed["a"+id[1:]], want) {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); noticed() < 9; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 9 holders told the write is confirmed", noticed())
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.mu.Lock()
	if f.commitNotices != 0 {
		t.Errorf("%d commit notices (PathCommitted), want none", f.commitNotices)
	}
	for addr := range f.held {
		if f.marked(addr, "b", "k") {
			t.Errorf("%s marked the write committed", addr)
		}
	}
	f.mu.Unlock()
	f.mu.Lock()
	f.calls = 0
	f.mu.Unlock()
	got, err := g.layer.readHead(ctx, "b", "k")
	if err != nil || got.Version != m.Version {
		t.Fatalf("read %v, %v", got, err)
	}
	if f.calls != 6 {
		t.Errorf("%d calls, want 6", f.calls)
	}
}
