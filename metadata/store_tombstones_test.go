package metadata

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestRemoveTombstone(t *testing.T) {
	ctx := context.Background()
	marker := func(ts int64) *Manifest {
		m := tomb("b", "k", ts)
		m.Versioned = true
		return m
	}
	cases := []struct {
		name    string
		puts    []*Manifest
		remove  Version
		removed bool
		want    string // renderVersions afterwards
	}{
		{"an object under it: kept", []*Manifest{obj("b", "k", 1, nodes3, "p1"), tomb("b", "k", 2)}, ver(2), false, "2~ | 1"},
		{"nothing under it: removed", []*Manifest{tomb("b", "k", 2)}, ver(2), true, "-"},
		{"an older write under it: kept", []*Manifest{tomb("b", "k", 2), obj("b", "k", 1, nodes3, "p1")}, ver(2), false, "2~ | 1"},
		{"a newer write over it: kept", []*Manifest{tomb("b", "k", 2), obj("b", "k", 3, nodes3, "p3")}, ver(2), false, "3 | 2~"},
		{"another version: kept", []*Manifest{tomb("b", "k", 2)}, ver(5), false, "2~ |"},
		{"a versioned delete marker: kept", []*Manifest{marker(2)}, ver(2), false, "2~ |"},
		{"an object of that version: kept", []*Manifest{obj("b", "k", 2, nodes3, "p2")}, ver(2), false, "2 |"},
		{"no key: nothing", nil, ver(2), false, "-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openMem(t, nil, "n1")
			for _, m := range tc.puts {
				if _, err := s.PutManifest(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := s.Stats(ctx)
			removed, err := s.RemoveTombstone(ctx, "b", "k", tc.remove)
			if err != nil {
				t.Fatal(err)
			}
			if removed != tc.removed {
				t.Fatalf("removed = %v, want %v", removed, tc.removed)
			}
			if got := renderVersions(t, s, "b", "k"); got != tc.want {
				t.Fatalf("versions %q, want %q", got, tc.want)
			}
			after, _ := s.Stats(ctx)
			if removed && (after.Tombstones != before.Tombstones-1 || after.TombstonesCollected != 1) {
				t.Fatalf("stats after removal: %+v (before %+v)", after, before)
			}
			if !removed && after != before {
				t.Fatalf("stats changed without a removal: %+v, before %+v", after, before)
			}
		})
	}
}

func TestTombstoneQueue(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_000_000, 0)
	a := TombstoneJob{Bucket: "b", Key: "a", Version: ver(1), Due: t0.Add(time.Minute)}
	c := TombstoneJob{Bucket: "b", Key: "c\x00x", Version: ver(2), Due: t0.Add(time.Hour)}
	for _, j := range []TombstoneJob{c, a} {
		if err := s.EnqueueTombstone(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	due, err := s.DueTombstones(ctx, t0.Add(time.Minute), 10)
	if err != nil || len(due) != 1 || due[0].Key != "a" {
		t.Fatalf("due at +1m: %+v, %v; want job a only", due, err)
	}
	// a is retried in two hours; c stays.
	next := a
	next.Attempts, next.Due = 1, t0.Add(2*time.Hour)
	if err := s.DoneTombstones(ctx, due, []TombstoneJob{next}); err != nil {
		t.Fatal(err)
	}
	due, err = s.DueTombstones(ctx, t0.Add(time.Hour), 10)
	if err != nil || len(due) != 1 || due[0].Key != "c\x00x" {
		t.Fatalf("due at +1h: %+v, %v; want job c only", due, err)
	}
	if st, _ := s.Stats(ctx); st.TombstoneJobs != 2 {
		t.Fatalf("TombstoneJobs = %d, want 2", st.TombstoneJobs)
	}
	// The queue and its count survive a restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open("db", Options{FS: fs, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if st, _ := s2.Stats(ctx); st.TombstoneJobs != 2 {
		t.Fatalf("TombstoneJobs after reopen = %d, want 2", st.TombstoneJobs)
	}
	due, err = s2.DueTombstones(ctx, t0.Add(3*time.Hour), 10)
	if err != nil || len(due) != 2 || due[0].Key != "c\x00x" || due[1].Key != "a" || due[1].Attempts != 1 {
		t.Fatalf("due at +3h after reopen: %+v, %v; want c then a (1 attempt)", due, err)
	}
}
