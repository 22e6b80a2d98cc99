package metadata

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// vid is the version ID a gateway gives a versioned write at ts.
func vid(ts int64) string { return ver(ts).String() }

// renderIDs prints a key's state as renderVersions does, each version
// suffixed with "v" and the TS its ID was made at ("2v1": a repair
// switch of version 1 at TS 2), nothing for the null version.
func renderIDs(t *testing.T, s *Store, bucket, key string) string {
	t.Helper()
	cur, prev, err := s.Versions(context.Background(), bucket, key)
	if errors.Is(err, ErrNotFound) {
		return "-"
	}
	if err != nil {
		t.Fatal(err)
	}
	name := func(m *Manifest) string {
		n := fmt.Sprint(m.Version.TS)
		if m.Deleted {
			n += "~"
		}
		if m.VersionID != "" {
			v, err := ParseVersion(m.VersionID)
			if err != nil {
				t.Fatal(err)
			}
			n += fmt.Sprintf("v%d", v.TS)
		}
		return n
	}
	out := []string{name(cur), "|"}
	for _, p := range prev {
		out = append(out, name(p))
	}
	return strings.Join(out, " ")
}

// TestVersionedHistory replays writes of versioned, suspended and
// unversioned buckets and checks what the confirm job (DropPrevious) and
// DeleteVersion leave: for each version ID the newest manifest, and the
// part index of exactly what is kept.
func TestVersionedHistory(t *testing.T) {
	// Steps: "put N" null-version object at TS N (part pN), "putv N" the
	// same with version ID vid(N), "del N" / "delv N" a null / versioned
	// delete marker, "repair N M" a repair switch at TS M of version
	// vid(N) (same part), "drop N" DropPrevious(upTo N), "rm N"
	// DeleteVersion(vid(N)), "rm null" DeleteVersion of the null version.
	cases := []struct {
		name    string
		steps   []string
		want    string
		owned   []string
		removed int // manifests the last rm returned
	}{
		{"unversioned drop keeps only the newest", []string{"put 1", "put 2", "put 3", "drop 3"}, "3 |", []string{"p3"}, 0},
		{"enabled keeps every version", []string{"putv 1", "putv 2", "putv 3", "drop 3"}, "3v3 | 2v2 1v1", []string{"p1", "p2", "p3"}, 0},
		{"enabled keeps the null version from before", []string{"put 1", "putv 2", "drop 2"}, "2v2 | 1", []string{"p1", "p2"}, 0},
		{"delete marker keeps the versions under it", []string{"putv 1", "putv 2", "delv 3", "drop 3"}, "3~v3 | 2v2 1v1", []string{"p1", "p2"}, 0},
		{"suspended write replaces only the null version", []string{"put 1", "putv 2", "put 3", "drop 3"}, "3 | 2v2", []string{"p2", "p3"}, 0},
		{"suspended null delete marker replaces the null version", []string{"put 1", "putv 2", "del 3", "drop 3"}, "3~ | 2v2", []string{"p2"}, 0},
		{"two null writes then a versioned one: the older null goes", []string{"put 1", "put 2", "putv 3", "drop 3"}, "3v3 | 2", []string{"p2", "p3"}, 0},
		{"drop below the newest keeps what is above upTo", []string{"put 1", "put 2", "put 3", "drop 2"}, "3 | 2", []string{"p2", "p3"}, 0},
		{"a repair switch replaces the manifest it repaired", []string{"putv 1", "putv 5", "repair 5 6", "drop 6"}, "6v5 | 1v1", []string{"p1", "p5"}, 0},
		{"a repair switch of a noncurrent version", []string{"putv 1", "putv 5", "repair 1 2", "drop 5"}, "5v5 | 2v1", []string{"p1", "p5"}, 0},
		{"rm a noncurrent version", []string{"putv 1", "putv 2", "putv 3", "rm 2"}, "3v3 | 1v1", []string{"p1", "p3"}, 1},
		{"rm the current version restores the newest previous", []string{"putv 1", "putv 2", "rm 2"}, "1v1 |", []string{"p1"}, 1},
		{"rm a delete marker brings the object back", []string{"putv 1", "delv 2", "rm 2"}, "1v1 |", []string{"p1"}, 1},
		{"rm the only version removes the key", []string{"putv 1", "rm 1"}, "-", nil, 1},
		{"rm the null version", []string{"put 1", "putv 2", "rm null"}, "2v2 |", []string{"p2"}, 1},
		{"rm removes every manifest of the ID", []string{"putv 1", "putv 5", "repair 5 6", "rm 5"}, "1v1 |", []string{"p1"}, 2},
		{"rm of an ID not held is a no-op", []string{"putv 1", "rm 7"}, "1v1 |", []string{"p1"}, 0},
		{"rm of a key not held is a no-op", []string{"rm 7"}, "-", nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openMem(t, nil, "n1")
			removed := 0
			for _, step := range tc.steps {
				var op, arg string
				var a, b int64
				fmt.Sscanf(step, "%s %s %d", &op, &arg, &b)
				fmt.Sscanf(arg, "%d", &a)
				var err error
				switch op {
				case "put", "putv":
					m := obj("b", "k", a, nodes3, fmt.Sprintf("p%d", a))
					m.Versioned = op == "putv"
					_, err = s.PutManifest(ctx, m)
				case "del", "delv":
					m := tomb("b", "k", a)
					m.Versioned = op == "delv"
					_, err = s.PutManifest(ctx, m)
				case "repair":
					m := obj("b", "k", b, nodes3, fmt.Sprintf("p%d", a))
					m.Versioned, m.VersionID = true, vid(a)
					_, err = s.PutManifest(ctx, m)
				case "drop":
					_, err = s.DropPrevious(ctx, "b", "k", ver(a), nil)
				case "rm":
					id := ""
					if arg != "null" {
						id = vid(a)
					}
					var rm []*Manifest
					rm, err = s.DeleteVersion(ctx, "b", "k", id, false)
					removed = len(rm)
				default:
					t.Fatalf("bad step %q", step)
				}
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
			}
			if got := renderIDs(t, s, "b", "k"); got != tc.want {
				t.Fatalf("versions %q, want %q", got, tc.want)
			}
			if removed != tc.removed {
				t.Fatalf("DeleteVersion removed %d manifests, want %d", removed, tc.removed)
			}
			var owned []string
			for i := 1; i <= 9; i++ {
				id := fmt.Sprintf("p%d", i)
				if refs, _ := s.PartOwners(ctx, id); len(refs) > 0 {
					owned = append(owned, id)
				}
			}
			if !slices.Equal(owned, tc.owned) {
				t.Fatalf("indexed parts %v, want %v", owned, tc.owned)
			}
		})
	}
}

// TestNoncurrentVersionsAreNotBounded: MaxPrevious and MaxPreviousKept
// count only versions a confirmation would drop, so a versioned key keeps
// every noncurrent version and is not confirmed at once on every write.
func TestNoncurrentVersionsAreNotBounded(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	const n = MaxPreviousKept + 5
	for ts := int64(1); ts <= n; ts++ {
		m := obj("b", "k", ts, nodes3, fmt.Sprint("p", ts))
		m.Versioned = true
		res, err := s.PutManifest(ctx, m)
		if err != nil || len(res.Dropped) != 0 || res.Previous != 0 {
			t.Fatalf("write %d: dropped %d, previous %d, %v", ts, len(res.Dropped), res.Previous, err)
		}
	}
	_, prev, err := s.Versions(ctx, "b", "k")
	if err != nil || len(prev) != n-1 {
		t.Fatalf("%d previous versions, want %d (%v)", len(prev), n-1, err)
	}
	// A suspended bucket's null writes count: each replaces the last.
	for ts := int64(n + 1); ts <= n+MaxPrevious+1; ts++ {
		if _, err := s.PutManifest(ctx, obj("b", "k", ts, nodes3, fmt.Sprint("p", ts))); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.PutManifest(ctx, obj("b", "k", n+MaxPrevious+2, nodes3, "px"))
	if err != nil || res.Previous != MaxPrevious+1 {
		t.Fatalf("previous %d, want %d (%v)", res.Previous, MaxPrevious+1, err)
	}
}

func TestVersionIDIsTheWritesVersion(t *testing.T) {
	m := obj("b", "k", 1, nodes3, "p1")
	for _, bad := range []struct {
		versioned bool
		id        string
	}{{true, NullVersionID}, {false, vid(1)}} {
		m.Versioned, m.VersionID = bad.versioned, bad.id
		if err := m.Validate(); !errors.Is(err, ErrInvalidManifest) {
			t.Fatalf("Validate(%v, %q) = %v, want ErrInvalidManifest", bad.versioned, bad.id, err)
		}
	}
	m.Versioned, m.VersionID = false, ""
	if err := m.Validate(); err != nil || m.S3VersionID() != NullVersionID {
		t.Fatalf("null version: %v %q", err, m.S3VersionID())
	}
	m.Versioned = true
	if m.S3VersionID() != vid(1) {
		t.Fatalf("S3VersionID before storing = %q, want %q", m.S3VersionID(), vid(1))
	}
	s := openMem(t, nil, "n1")
	if _, err := s.PutManifest(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetManifest(context.Background(), "b", "k")
	if err != nil || got.VersionID != vid(1) {
		t.Fatalf("stored version ID %q, want %q (%v)", got.VersionID, vid(1), err)
	}
}

// TestStatsCountPrevious: kept versions are counted (and their shards on
// this node), uncounted when they go, and a reopen's scan agrees.
func TestStatsCountPrevious(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	for ts := int64(1); ts <= 3; ts++ {
		m := obj("b", "k", ts, nodes3, fmt.Sprint("p", ts))
		m.Versioned = true
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	marker := tomb("b", "k", 4)
	marker.Versioned = true
	if _, err := s.PutManifest(ctx, marker); err != nil {
		t.Fatal(err)
	}
	want := Stats{Tombstones: 1, Previous: 3, PreviousBytes: 300, PreviousShards: 3}
	if got, _ := s.Stats(ctx); got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	if _, err := s.DeleteVersion(ctx, "b", "k", vid(2), false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteVersion(ctx, "b", "k", vid(4), false); err != nil {
		t.Fatal(err)
	}
	want = Stats{Objects: 1, Bytes: 100, Shards: 1, Previous: 1, PreviousBytes: 100, PreviousShards: 1}
	if got, _ := s.Stats(ctx); got != want {
		t.Fatalf("stats after removing v2 and the marker %+v, want %+v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, "n1")
	if got, _ := s.Stats(ctx); got != want {
		t.Fatalf("stats after reopen %+v, want %+v", got, want)
	}
}
