package metadata

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// putSteps applies steps to (bucket, key) as TestVersionedHistory reads
// them: "put N", "putv N", "del N", "delv N", "repair N M".
func putSteps(t *testing.T, s *Store, bucket, key string, steps ...string) {
	t.Helper()
	ctx := context.Background()
	for _, step := range steps {
		var op string
		var a, b int64
		fmt.Sscanf(step, "%s %d %d", &op, &a, &b)
		var m *Manifest
		switch op {
		case "put", "putv":
			m = obj(bucket, key, a, nodes3, fmt.Sprintf("%s-p%d", key, a))
			m.Versioned = op == "putv"
		case "del", "delv":
			m = tomb(bucket, key, a)
			m.Versioned = op == "delv"
		case "repair":
			m = obj(bucket, key, b, nodes3, fmt.Sprintf("%s-p%d", key, a))
			m.Versioned, m.VersionID = true, vid(a)
		default:
			t.Fatalf("bad step %q", step)
		}
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatalf("%s/%s %s: %v", bucket, key, step, err)
		}
	}
}

// walkVersions renders what EachVersionAfter yields as "key:TSvID" (no
// "v" for the null version), in order.
func walkVersions(t *testing.T, s *Store, after *Cursor) []string {
	t.Helper()
	var out []string
	err := s.EachVersionAfter(context.Background(), after, func(m *Manifest) error {
		if m.Inline != nil {
			t.Errorf("%s/%s: the walk returned inline data", m.Bucket, m.Key)
		}
		n := fmt.Sprintf("%s:%d", m.Key, m.Version.TS)
		if m.VersionID != "" {
			v, err := ParseVersion(m.VersionID)
			if err != nil {
				t.Fatal(err)
			}
			n += fmt.Sprintf("v%d", v.TS)
		}
		out = append(out, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEachVersion: the walk yields the noncurrent versions of versioned
// and suspended buckets, the null version from before versioning
// included; not the replaced versions awaiting confirmation (an
// unversioned overwrite, a suspended bucket's older null version, the
// manifest a repair switch rewrote), not delete markers, and never a
// current manifest.
func TestEachVersion(t *testing.T) {
	s := openMem(t, nil, "n1")
	putSteps(t, s, "b", "a", "putv 1", "putv 2", "putv 3")               // enabled
	putSteps(t, s, "b", "b", "put 1", "put 2")                           // unversioned overwrite
	putSteps(t, s, "b", "c", "put 1", "putv 2", "delv 3")                // under a delete marker
	putSteps(t, s, "b", "d", "putv 1", "delv 2", "putv 3")               // a marker in the middle
	putSteps(t, s, "b", "e", "putv 1", "putv 5", "repair 1 2")           // a noncurrent version repaired
	putSteps(t, s, "b", "f", "put 1", "putv 2", "put 3")                 // suspended: the null version replaced
	putSteps(t, s, "c", "a", "putv 1", "putv 2", "repair 2 3", "putv 4") // switched, then overwritten
	got := strings.Join(walkVersions(t, s, nil), " ")
	want := "a:1v1 a:2v2 c:1 c:2v2 d:1v1 e:2v1 f:2v2 a:1v1 a:3v2"
	if got != want {
		t.Fatalf("noncurrent versions %q, want %q", got, want)
	}
	// Resuming: after a version, and after a key.
	v1 := ver(1)
	if got := strings.Join(walkVersions(t, s, &Cursor{Bucket: "b", Key: "c", Version: &v1}), " "); got != "c:2v2 d:1v1 e:2v1 f:2v2 a:1v1 a:3v2" {
		t.Fatalf("after b/c@1: %q", got)
	}
	if got := strings.Join(walkVersions(t, s, &Cursor{Bucket: "b", Key: "c"}), " "); got != "d:1v1 e:2v1 f:2v2 a:1v1 a:3v2" {
		t.Fatalf("after b/c: %q", got)
	}

	// GetVersion reads a previous version whole; the current one is not
	// a previous version.
	ctx := context.Background()
	m, err := s.GetVersion(ctx, "b", "e", ver(2))
	if err != nil || m.VersionID != vid(1) || m.Parts[0].ID != "e-p1" {
		t.Fatalf("GetVersion b/e@2: %+v %v", m, err)
	}
	if _, err := s.GetVersion(ctx, "b", "e", ver(5)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetVersion of the current version: %v, want ErrNotFound", err)
	}
}

// TestEachVersionPages: a walk longer than a page yields every noncurrent
// version once, in order, and judges each key's versions together even
// where a page would end inside them (a repaired version's old manifest
// read without the switch that replaced it would be yielded).
func TestEachVersionPages(t *testing.T) {
	s := openMem(t, nil, "n1")
	const keys = 400 // three previous versions each: a page ends inside a key
	for i := range keys {
		putSteps(t, s, "b", fmt.Sprintf("k%04d", i), "putv 1", "putv 3", "repair 1 2", "putv 4")
	}
	got := walkVersions(t, s, nil)
	if len(got) != 2*keys {
		t.Fatalf("%d noncurrent versions, want %d", len(got), 2*keys)
	}
	for i := range keys {
		k := fmt.Sprintf("k%04d", i)
		if got[2*i] != k+":2v1" || got[2*i+1] != k+":3v3" {
			t.Fatalf("versions of %s: %v, want the repaired 1 (at 2) and 3", k, got[2*i:2*i+2])
		}
	}
}

// TestPutResultHeld: a manifest older than the current one is kept as a
// previous version and reported held, as is one held already; the repair
// switch of a noncurrent version counts its copies by it.
func TestPutResultHeld(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	putSteps(t, s, "b", "k", "putv 1", "putv 5")
	sw := obj("b", "k", 2, nodes3, "k-p1")
	sw.Versioned, sw.VersionID = true, vid(1)
	for try := range 2 {
		res, err := s.PutManifest(ctx, sw)
		if err != nil || res.Stored || !res.Held || res.Current.Version != ver(5) {
			t.Fatalf("try %d: stored %v held %v current %v, %v; want held beside current 5", try, res.Stored, res.Held, res.Current.Version, err)
		}
	}
	if got := renderIDs(t, s, "b", "k"); got != "5v5 | 2v1 1v1" {
		t.Fatalf("versions %q", got)
	}
	res, err := s.PutManifest(ctx, obj("b", "k2", 1, nodes3, "p"))
	if err != nil || !res.Stored || !res.Held {
		t.Fatalf("a new key: stored %v held %v, %v", res.Stored, res.Held, err)
	}
}
