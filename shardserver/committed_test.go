package shardserver

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// TestCommittedNoticeConfirmsWithoutAsking: with every peer unreachable a
// confirm job can decide nothing, but a gateway's notice that the version
// is on a write quorum confirms it: the previous version goes.
func TestCommittedNoticeConfirmsWithoutAsking(t *testing.T) {
	ce := newConfirmEnv(t)
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	ce.setPeers(0, 9, peerState{err: errors.New("connection refused")})
	ce.tick(t, testGCDelay)
	if got := ce.state(t); got != "2 | 1" {
		t.Fatalf("without a notice, peers silent: versions %q, want both kept", got)
	}
	ref := shardrpc.VersionRef{Bucket: "b", Key: "k", Version: v2.Version}
	if err := ce.client.Committed(context.Background(), ce.addr, []shardrpc.VersionRef{ref}); err != nil {
		t.Fatal(err)
	}
	ce.tick(t, ce.srv.retryDelay())
	if got := ce.state(t); got != "2 |" {
		t.Fatalf("after the notice: versions %q, want v1 dropped", got)
	}
}

// TestConfirmedNoticeConfirmsWithoutMarking: a repair switch's notice
// (PathConfirmed) serves the confirm job as a gateway's does, which then
// asks no peer (all silent here, so asking could not confirm), but never
// marks the version committed for readers; and it notes only a current
// version with previous versions under it.
func TestConfirmedNoticeConfirmsWithoutMarking(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx := context.Background()
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	notice := func(v *metadata.Manifest) {
		t.Helper()
		ref := shardrpc.VersionRef{Bucket: "b", Key: "k", Version: v.Version}
		if err := ce.client.Confirmed(ctx, ce.addr, []shardrpc.VersionRef{ref}); err != nil {
			t.Fatal(err)
		}
	}
	unmarked := func(step string) {
		t.Helper()
		res, err := ce.client.LookupVersions(ctx, ce.addr, "b", "k", false)
		if err != nil || res.Committed {
			t.Fatalf("%s: committed %v (%v), want no mark", step, res.Committed, err)
		}
	}
	ce.putManifest(t, v1)
	notice(v1)
	unmarked("a fresh key noticed")
	notice(v2) // not held here
	if n := len(ce.srv.notes.set); n != 0 {
		t.Fatalf("%d confirm notes for a key without previous versions or a version not held", n)
	}
	ce.putManifest(t, v2)
	notice(v2)
	unmarked("the overwrite noticed")
	if n := len(ce.srv.notes.set); n != 1 {
		t.Fatalf("%d confirm notes for an overwrite, want 1", n)
	}
	ce.setPeers(0, 9, peerState{err: errors.New("connection refused")})
	ce.tick(t, testGCDelay)
	if got := ce.state(t); got != "2 |" {
		t.Fatalf("after the notice: versions %q, want v1 dropped", got)
	}
	if ce.peers.calls != 0 {
		t.Fatalf("the confirm job asked %d peers, want none", ce.peers.calls)
	}
	unmarked("confirmed")
}

func TestCommittedSetIsBounded(t *testing.T) {
	var c committedSet
	for i := range maxCommitted + 10 {
		c.add(shardrpc.VersionRef{Bucket: "b", Key: "k", Version: wide(int64(i+1), "p").Version})
	}
	if len(c.set) > maxCommitted {
		t.Fatalf("%d notes kept, bound %d", len(c.set), maxCommitted)
	}
	first := shardrpc.VersionRef{Bucket: "b", Key: "k", Version: wide(1, "p").Version}
	last := shardrpc.VersionRef{Bucket: "b", Key: "k", Version: wide(int64(maxCommitted+10), "p").Version}
	if c.take(first) || !c.take(last) || c.take(last) {
		t.Fatal("want the oldest note evicted, the newest taken once")
	}
}

// TestCommittedNoticeOnlyNotes: an older gateway's commit notice
// (PathCommitted) is taken as a confirm notice: it marks nothing in the
// record (no lookup reads a mark, and it cost a pebble write per notice),
// and takes a confirm note only for a version current here with previous
// versions (a fresh key's note would never be taken).
func TestCommittedNoticeOnlyNotes(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx := context.Background()
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	notice := func(v *metadata.Manifest) {
		t.Helper()
		ref := shardrpc.VersionRef{Bucket: "b", Key: "k", Version: v.Version}
		if err := ce.client.Committed(ctx, ce.addr, []shardrpc.VersionRef{ref}); err != nil {
			t.Fatal(err)
		}
	}
	committed := func(step string, want bool) {
		t.Helper()
		res, err := ce.client.LookupVersions(ctx, ce.addr, "b", "k", false)
		if err != nil || res.Committed != want {
			t.Fatalf("%s: committed %v (%v), want %v", step, res.Committed, err, want)
		}
	}
	committed("written", false)
	notice(v2) // not held here
	committed("a notice of another version", false)
	notice(v1)
	committed("noticed", false)
	if n := len(ce.srv.notes.set); n != 0 {
		t.Fatalf("%d confirm notes for a key without previous versions", n)
	}
	ce.putManifest(t, v2)
	committed("overwritten", false)
	notice(v2)
	committed("the overwrite noticed", false)
	if n := len(ce.srv.notes.set); n != 1 {
		t.Fatalf("%d confirm notes for an overwrite, want 1", n)
	}
}

// A note is kept as a hash of its version: versions that differ only in
// where one name ends and the next begins, or in their writer or time,
// are different notes.
func TestCommittedSetTellsVersionsApart(t *testing.T) {
	var c committedSet
	v := metadata.Version{TS: 5, Writer: "gw"}
	c.add(shardrpc.VersionRef{Bucket: "ab", Key: "c", Version: v})
	for _, other := range []shardrpc.VersionRef{
		{Bucket: "a", Key: "bc", Version: v},
		{Bucket: "ab", Key: "c", Version: metadata.Version{TS: 6, Writer: "gw"}},
		{Bucket: "ab", Key: "c", Version: metadata.Version{TS: 5, Writer: "gw2"}},
	} {
		if c.take(other) {
			t.Fatalf("%+v taken as the note of ab/c", other)
		}
	}
	if !c.take(shardrpc.VersionRef{Bucket: "ab", Key: "c", Version: v}) {
		t.Fatal("the note itself was not taken")
	}
}

// TestNoticeConfirmsEarly: a notice that the current version is on a
// write quorum runs its confirm job at once (runEarlyConfirms), without
// waiting for GCDelay and without asking a peer; the replaced version's
// shard file still waits GCDelay from then, for reads in flight. The job
// itself, when due, finds nothing left to do.
func TestNoticeConfirmsEarly(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ce.srv.runEarlyConfirms(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	ce.setPeers(0, 9, peerState{err: errors.New("connection refused")})
	ref := shardrpc.VersionRef{Bucket: "b", Key: "k", Version: v2.Version}
	if err := ce.client.SwitchConfirmed(ctx, ce.addr, []shardrpc.VersionRef{ref}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ce.state(t) != "2 |" {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the notice, the clock still: versions %q, want v1 dropped", ce.state(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ce.peers.calls != 0 {
		t.Fatalf("the early run asked %d peers, want none", ce.peers.calls)
	}
	ce.tick(t, testGCDelay-time.Second)
	if !ce.exists(t, "p1", 1) {
		t.Fatal("the replaced version's shard was collected before GCDelay had passed since its drop")
	}
	ce.tick(t, 2*time.Second)
	if ce.exists(t, "p1", 1) {
		t.Fatal("the replaced version's shard outlived GCDelay after its drop")
	}
	if got := ce.state(t); got != "2 |" || ce.peers.calls != 0 {
		t.Fatalf("after the job's own run: versions %q, %d peers asked; want v2 alone, none", got, ce.peers.calls)
	}
}

// TestEarlyConfirmLeavesWhatNeedsAsking: an early run never asks the
// peers and never rolls back: a version that was not noted keeps its
// previous versions (and its job) until the job's own run.
func TestEarlyConfirmLeavesWhatNeedsAsking(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx := context.Background()
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	ce.setPeers(0, 9, peerState{err: errors.New("connection refused")})
	ce.srv.confirmEarly(ctx, []shardrpc.VersionRef{{Bucket: "b", Key: "k", Version: v2.Version}})
	if got := ce.state(t); got != "2 | 1" || ce.peers.calls != 0 {
		t.Fatalf("after it: versions %q, %d peers asked; want both kept, none asked", got, ce.peers.calls)
	}
}

// TestOnlySwitchNoticesExpedite: a gateway's notice (after an overwrite or
// a delete) notes the version for its job but queues no early run, so the
// drop stays out of the client's requests; a repair switch's notice
// queues one.
func TestOnlySwitchNoticesExpedite(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx := context.Background()
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	ref := shardrpc.VersionRef{Bucket: "b", Key: "k", Version: v2.Version}
	if err := ce.client.Confirmed(ctx, ce.addr, []shardrpc.VersionRef{ref}); err != nil {
		t.Fatal(err)
	}
	if n := len(ce.srv.early); n != 0 {
		t.Fatalf("a gateway's notice queued %d early runs, want none", n)
	}
	if err := ce.client.SwitchConfirmed(ctx, ce.addr, []shardrpc.VersionRef{ref}); err != nil {
		t.Fatal(err)
	}
	if n := len(ce.srv.early); n != 1 {
		t.Fatalf("a switch's notice queued %d early runs, want one", n)
	}
}

// TestFullEarlyQueueHoldsSwitchNotices: a repair switch's notice that
// finds the early queue full waits for room instead of being dropped, so
// the repair that waits for its answer goes no faster than the early
// runs; one whose request ends first is dropped (its job runs when due).
func TestFullEarlyQueueHoldsSwitchNotices(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx := context.Background()
	v1, v2 := wide(1, "p1"), wide(2, "p2")
	ce.putManifest(t, v1)
	ce.putManifest(t, v2)
	fill := func() {
		for len(ce.srv.early) < cap(ce.srv.early) {
			ce.srv.early <- shardrpc.VersionRef{Bucket: "b", Key: "filler"}
		}
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not in 10 s: %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// noted waits until the handler has noted the version, which it does
	// just before it queues the early run.
	noted := func() {
		t.Helper()
		waitUntil("the notice reached the handler", func() bool {
			ce.srv.notes.mu.Lock()
			defer ce.srv.notes.mu.Unlock()
			return len(ce.srv.notes.set) > 0
		})
	}
	fill()
	ref := shardrpc.VersionRef{Bucket: "b", Key: "k", Version: v2.Version}
	sent := make(chan error, 1)
	go func() { sent <- ce.client.SwitchConfirmed(ctx, ce.addr, []shardrpc.VersionRef{ref}) }()
	noted()
	select {
	case err := <-sent:
		t.Fatalf("the notice was answered (%v) while the queue was full", err)
	case <-time.After(200 * time.Millisecond):
	}
	<-ce.srv.early // room for one
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	var last shardrpc.VersionRef
	for len(ce.srv.early) > 0 {
		last = <-ce.srv.early
	}
	if last != ref {
		t.Fatalf("the queue ends with %+v, want the notice that waited", last)
	}
	if got := testutil.ToFloat64(ce.srv.m.earlyNotices.WithLabelValues("waited")); got != 1 {
		t.Fatalf("%v notices counted as waited, want 1", got)
	}

	fill()
	if !ce.srv.notes.take(ref) {
		t.Fatal("the notice's version is not noted for its job")
	}
	short, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { sent <- ce.client.SwitchConfirmed(short, ce.addr, []shardrpc.VersionRef{ref}) }()
	noted()
	cancel() // the request ends while its notice waits
	if err := <-sent; err == nil {
		t.Fatal("a notice into a full queue was answered before its request ended")
	}
	waitUntil("the notice whose request ended counted as dropped", func() bool {
		return testutil.ToFloat64(ce.srv.m.earlyNotices.WithLabelValues("dropped")) == 1
	})
	if !ce.srv.notes.take(ref) {
		t.Fatal("the dropped notice's version is not noted for its job")
	}
}

// TestEarlyConfirmsInABatch: confirmEarly decides a batch of notices in
// one pass: a noted version still current drops what it replaced (once,
// though named twice); a version not noted, or no longer current, keeps
// its previous versions for its job; a key the server never held is
// passed over. No peer is asked.
func TestEarlyConfirmsInABatch(t *testing.T) {
	ce := newConfirmEnv(t)
	ctx := context.Background()
	ce.setPeers(0, 9, peerState{err: errors.New("connection refused")})
	put := func(key string) (v1, v2 *metadata.Manifest) {
		v1, v2 = wide(1, "p1"), wide(2, "p2")
		v1.Key, v2.Key = key, key
		ce.putManifest(t, v1)
		ce.putManifest(t, v2)
		return v1, v2
	}
	ref := func(m *metadata.Manifest) shardrpc.VersionRef {
		return shardrpc.VersionRef{Bucket: m.Bucket, Key: m.Key, Version: m.Version}
	}
	_, noted := put("noted")
	_, twice := put("twice")
	_, unnoted := put("unnoted")
	old, moved := put("moved")
	ce.srv.notes.add(ref(noted))
	ce.srv.notes.add(ref(twice))
	ce.srv.notes.add(ref(moved))
	ce.srv.notes.add(ref(old)) // NB: a note of a version no longer current
	never := ref(noted)
	never.Key = "never"
	ce.srv.notes.add(never)

	ce.srv.confirmEarly(ctx, []shardrpc.VersionRef{ref(noted), ref(twice), ref(unnoted), ref(old), never, ref(twice)})

	for key, want := range map[string]string{"noted": "2 |", "twice": "2 |", "unnoted": "2 | 1", "moved": "2 | 1"} {
		cur, prev, err := ce.client.GetManifestVersions(ctx, ce.addr, "b", key)
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprintf("%d |", cur.Version.TS)
		for _, p := range prev {
			got += fmt.Sprintf(" %d", p.Version.TS)
		}
		if got != want {
			t.Errorf("%s: versions %q after the batch, want %q", key, got, want)
		}
	}
	if ce.peers.calls != 0 {
		t.Fatalf("the early runs asked %d peers, want none", ce.peers.calls)
	}
	// The note of the version the batch passed over (moved: its ref named
	// the old version) is still there for its job; the used ones are gone.
	if !ce.srv.notes.take(ref(moved)) {
		t.Error("the note of a version no early run decided was taken")
	}
	if ce.srv.notes.take(ref(noted)) {
		t.Error("the note of a version confirmed early is still there")
	}
}
