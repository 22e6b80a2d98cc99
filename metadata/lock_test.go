package metadata

import (
	"context"
	"errors"
	"strings"
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
	dropped, err = s.DropPrevious(ctx, "b", "k", ver(3), nil)
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

// openClocked opens an in-memory store whose clock reads *now.
func openClocked(t *testing.T, now *time.Time) *Store {
	t.Helper()
	s, err := Open("db", Options{FS: vfs.NewMem(), NodeID: "n1", Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestDeleteVersionRefusesLocked: a store refuses to remove a version
// while the newest manifest of its ID protects it (legal hold,
// COMPLIANCE, GOVERNANCE without bypass), removing nothing, and removes
// it once the lock is released, has run out, or is GOVERNANCE bypassed.
func TestDeleteVersionRefusesLocked(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := openClocked(t, &now)
	later, earlier := now.Add(time.Hour), now.Add(-time.Second)
	locks := map[string]*Lock{
		"gov":     {Mode: LockGovernance, RetainUntil: later},
		"comp":    {Mode: LockCompliance, RetainUntil: later},
		"hold":    {LegalHold: true},
		"govhold": {Mode: LockGovernance, RetainUntil: later, LegalHold: true},
		"expired": {Mode: LockCompliance, RetainUntil: earlier},
	}
	ts := int64(0)
	ids := map[string]string{}
	written := map[string]*Manifest{}
	for name, l := range locks {
		ts++
		m := obj("b", "k", ts, nodes3, "p"+name)
		m.Versioned, m.Lock = true, l
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
		ids[name], written[name] = m.VersionID, m
	}
	for _, c := range []struct {
		name    string
		bypass  bool
		removed bool
	}{
		{"gov", false, false}, {"comp", true, false}, {"hold", true, false}, {"govhold", true, false},
		{"expired", false, true}, {"gov", true, true},
	} {
		rm, err := s.DeleteVersion(ctx, "b", "k", ids[c.name], c.bypass)
		if got := err == nil && len(rm) == 1; got != c.removed || (!c.removed && !errors.Is(err, ErrLocked)) {
			t.Errorf("DeleteVersion(%s, bypass %v) = %d removed, %v; want removed %v", c.name, c.bypass, len(rm), err, c.removed)
		}
	}
	// Released in a newer manifest of its ID: the newest decides.
	released := *written["hold"]
	released.Version, released.Lock = ver(ts+1), nil
	if _, err := s.PutManifest(ctx, &released); err != nil {
		t.Fatal(err)
	}
	if rm, err := s.DeleteVersion(ctx, "b", "k", ids["hold"], false); err != nil || len(rm) != 2 {
		t.Errorf("DeleteVersion of a released hold = %d removed, %v; want both manifests", len(rm), err)
	}
	if got := renderIDs(t, s, "b", "k"); strings.Count(got, "v") != 2 {
		t.Errorf("versions left %q, want comp and govhold only", got)
	}
}

// TestComplianceNotWeakened: a newer manifest of a version under
// COMPLIANCE retention must keep it (same mode, same or later date);
// GOVERNANCE, legal holds and run-out retentions may change (the owner's
// calls, which a shard server cannot tell apart). A newer manifest of a
// version under any lock in force must keep its data.
func TestComplianceNotWeakened(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := openClocked(t, &now)
	until := now.Add(time.Hour)
	ts := int64(1)
	data := obj("b", "k", 1, nodes3, "p")
	data.Versioned = true
	put := func(id string, l *Lock) error {
		m := *data
		m.Version, m.VersionID, m.Lock = ver(ts), id, l
		ts++
		_, err := s.PutManifest(ctx, &m)
		return err
	}
	if err := put("c", &Lock{Mode: LockCompliance, RetainUntil: until}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Lock{nil, {Mode: LockGovernance, RetainUntil: until.Add(time.Hour)}, {Mode: LockCompliance, RetainUntil: until.Add(-time.Millisecond)}, {LegalHold: true}} {
		if err := put("c", l); !errors.Is(err, ErrLocked) {
			t.Errorf("COMPLIANCE replaced by %+v: %v; want ErrLocked", l, err)
		}
	}
	for _, l := range []*Lock{{Mode: LockCompliance, RetainUntil: until}, {Mode: LockCompliance, RetainUntil: until.Add(time.Hour), LegalHold: true}} {
		if err := put("c", l); err != nil {
			t.Errorf("COMPLIANCE kept by %+v: %v", l, err)
		}
	}
	// Another version ID on top is a new version, not a replacement.
	if err := put("other", nil); err != nil {
		t.Errorf("a new version over a COMPLIANCE one: %v", err)
	}
	if err := put("g", &Lock{Mode: LockGovernance, RetainUntil: until, LegalHold: true}); err != nil {
		t.Fatal(err)
	}
	// Other data under the same ID (a repair switch keeps the parts and
	// moves only the placement): refused while any lock is in force.
	other := *data
	other.Version, other.VersionID, other.Lock = ver(ts), "g", &Lock{Mode: LockGovernance, RetainUntil: until, LegalHold: true}
	other.Parts = []Part{{Number: 1, ID: "q", Size: 100, ShardCRC: make([]uint32, 3)}}
	ts++
	if _, err := s.PutManifest(ctx, &other); !errors.Is(err, ErrLocked) {
		t.Errorf("other data under a held version's ID: %v; want ErrLocked", err)
	}
	moved := *data
	moved.Version, moved.VersionID, moved.Lock = ver(ts), "g", other.Lock
	moved.Placement = []string{"n1", "n2", "n4"}
	ts++
	if _, err := s.PutManifest(ctx, &moved); err != nil {
		t.Errorf("a repair switch of a held version: %v", err)
	}
	if err := put("g", nil); err != nil {
		t.Errorf("GOVERNANCE and hold released: %v", err)
	}
	now = until.Add(time.Hour)
	if err := put("c", nil); err != nil {
		t.Errorf("a COMPLIANCE retention run out, released: %v", err)
	}
}

// TestDropPreviousOnlyForSeen: a manifest goes for a newer one of its
// version ID only when the caller saw that one visible (the partial
// repair switch of docs/VERSIONING.md's known limits).
func TestDropPreviousOnlyForSeen(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	old := obj("b", "k", 10, nodes3, "p1")
	old.Versioned = true
	if _, err := s.PutManifest(ctx, old); err != nil {
		t.Fatal(err)
	}
	cur := obj("b", "k", 20, nodes3, "p2")
	cur.Versioned = true
	if _, err := s.PutManifest(ctx, cur); err != nil {
		t.Fatal(err)
	}
	// A repair switch of the noncurrent version: TS+1, same ID.
	sw := *old
	sw.Version = Version{TS: 11, Writer: "+repair-n3"}
	if _, err := s.PutManifest(ctx, &sw); err != nil {
		t.Fatal(err)
	}
	notSeen := func(m *Manifest) bool { return m.Version == cur.Version }
	if dropped, err := s.DropPrevious(ctx, "b", "k", cur.Version, notSeen); err != nil || len(dropped) != 0 {
		t.Fatalf("dropped %v, %v for a switch not seen visible; want nothing", dropped, err)
	}
	seen := func(m *Manifest) bool { return m.Version == sw.Version || m.Version == cur.Version }
	dropped, err := s.DropPrevious(ctx, "b", "k", cur.Version, seen)
	if err != nil || len(dropped) != 1 || dropped[0].Version != old.Version {
		t.Fatalf("dropped %v, %v for a switch seen visible; want the manifest it rewrote", dropped, err)
	}
}
