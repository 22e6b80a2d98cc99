package metadata

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestEachManifestAfter: a walk resumed after a cursor visits exactly the
// keys after it, across buckets, for a cursor on a key, on a deleted key,
// on a key that is a prefix of the next ones, and past the last key; and
// a cursor survives a reopen of the store until it is cleared.
func TestEachManifestAfter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"a/k", "a/k\x00", "a/k1", "a/z", "b/!", "b/k", "bb/k"}
	for _, bk := range all {
		b, k, _ := strings.Cut(bk, "/")
		if _, err := s.PutManifest(ctx, obj(b, k, 1, nodes3, "p-"+bk)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutManifest(ctx, tomb("a", "k1", 2)); err != nil {
		t.Fatal(err)
	}
	live := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "a/k1" })
	walk := func(after *Cursor) []string {
		var got []string
		if err := s.EachManifestAfter(ctx, after, func(m *Manifest) error {
			got = append(got, m.Bucket+"/"+m.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, tc := range []struct {
		after *Cursor
		want  []string
	}{
		{nil, live},
		{&Cursor{Bucket: "a", Key: "k"}, live[1:]},
		{&Cursor{Bucket: "a", Key: "k1"}, live[2:]}, // deleted since: the walk goes on after it
		{&Cursor{Bucket: "a", Key: "zz"}, live[3:]},
		{&Cursor{Bucket: "b", Key: ""}, live[3:]},
		{&Cursor{Bucket: "b", Key: "!"}, live[4:]},
		{&Cursor{Bucket: "bb", Key: "k"}, nil},
		{&Cursor{Bucket: "c", Key: ""}, nil},
	} {
		if got := walk(tc.after); !slices.Equal(got, tc.want) {
			t.Errorf("after %v: %q, want %q", tc.after, got, tc.want)
		}
	}

	if c, err := s.LoadCursor(ctx, "scrub"); c != nil || err != nil {
		t.Fatalf("cursor of a new store: %v, %v", c, err)
	}
	if err := s.SaveCursor(ctx, "scrub", &Cursor{Bucket: "a", Key: "k\x00"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.LoadCursor(ctx, "scrub")
	if err != nil || c == nil || *c != (Cursor{Bucket: "a", Key: "k\x00"}) {
		t.Fatalf("cursor after a reopen: %v, %v", c, err)
	}
	if got := walk(c); !slices.Equal(got, live[2:]) {
		t.Errorf("walk from the saved cursor: %q", got)
	}
	if err := s.SaveCursor(ctx, "scrub", nil); err != nil {
		t.Fatal(err)
	}
	if c, err := s.LoadCursor(ctx, "scrub"); c != nil || err != nil {
		t.Fatalf("cleared cursor: %v, %v", c, err)
	}
	if n := len(walk(nil)); n != len(live) {
		t.Errorf("the cursor record shows in the manifest walk: %d keys, want %d", n, len(live))
	}
}

// TestEachStripedAfter: the scrubber's walk visits the objects with shards
// only, resumed after a cursor like EachManifestAfter: inline objects and
// tombstones are left out, wherever the cursor is.
func TestEachStripedAfter(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, m := range []*Manifest{
		obj("a", "1", 1, nodes3, "p1"),
		inline("a", "2", 1, "small"),
		obj("a", "3", 1, nodes3, "p3"),
		obj("a", "4", 1, nodes3, "p4"),
		inline("b", "1", 1, "x"),
		obj("b", "2", 1, nodes3, "p5"),
	} {
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutManifest(ctx, tomb("a", "4", 2)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		after *Cursor
		want  []string
	}{
		{nil, []string{"a/1", "a/3", "b/2"}},
		{&Cursor{Bucket: "a", Key: "1"}, []string{"a/3", "b/2"}},
		{&Cursor{Bucket: "a", Key: "2"}, []string{"a/3", "b/2"}},
		{&Cursor{Bucket: "a", Key: "3"}, []string{"b/2"}},
		{&Cursor{Bucket: "b", Key: "2"}, nil},
	} {
		var got []string
		if err := s.EachStripedAfter(ctx, tc.after, func(m *Manifest) error {
			if len(m.Parts) == 0 {
				t.Errorf("%s/%s: an inline object in the striped walk", m.Bucket, m.Key)
			}
			got = append(got, m.Bucket+"/"+m.Key)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("after %v: %q, want %q", tc.after, got, tc.want)
		}
	}
}
