package metadata

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestLockedVersionsKept: in a versioned bucket (every object lock
// bucket is one, for good) the confirm job keeps every version ID, a
// locked one included, and of a version whose lock was updated (a newer
// manifest of the same ID) it keeps the update; the lock comes back
// exact after a reopen.
func TestLockedVersionsKept(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Date(2031, 1, 2, 3, 4, 5, 6e6, time.UTC)
	v1 := obj("b", "k", 1, nodes3, "p1")
	v1.Versioned = true
	v1.Lock = &Lock{Mode: LockGovernance, RetainUntil: until}
	if _, err := s.PutManifest(ctx, v1); err != nil {
		t.Fatal(err)
	}
	// PutObjectLegalHold on v1 while current: the same ID, a newer
	// manifest.
	held := *v1
	held.Version = ver(2)
	held.Lock = &Lock{Mode: LockGovernance, RetainUntil: until, LegalHold: true}
	if _, err := s.PutManifest(ctx, &held); err != nil {
		t.Fatal(err)
	}
	var dropped []*Manifest
	v3 := obj("b", "k", 3, nodes3, "p3")
	v3.Versioned = true
	if _, err := s.PutManifest(ctx, v3); err != nil {
		t.Fatal(err)
	}
	dropped, err = s.DropPrevious(ctx, "b", "k", ver(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || dropped[0].Version != ver(1) {
		t.Fatalf("dropped %v, want only the manifest v1's lock update replaced", dropped)
	}
	if got := renderIDs(t, s, "b", "k"); got != "3v3 | 2v1" {
		t.Fatalf("versions %q, want v3 current and v1 (its update at 2) kept", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, "n1")
	_, prev, err := s.Versions(ctx, "b", "k")
	if err != nil || len(prev) != 1 {
		t.Fatalf("versions after reopen: %v, %v", prev, err)
	}
	if l := prev[0].Lock; l == nil || l.Mode != LockGovernance || !l.LegalHold || !l.RetainUntil.Equal(until) {
		t.Fatalf("lock after reopen %+v, want %+v", l, held.Lock)
	}
	if !prev[0].Lock.Retained(until.Add(-time.Second)) || !prev[0].Lock.Retained(until.Add(time.Hour)) {
		t.Error("a held version is not retained")
	}
}
