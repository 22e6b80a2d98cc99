package metadata

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// render prints a listing compactly: keys as "key", tombstones as "key~",
// prefixes as "prefix*" (unsure ones "prefix?"), and "+" when truncated.
func render(es []ListEntry, truncated bool) string {
	var parts []string
	for _, e := range es {
		switch {
		case e.Prefix != "" && e.Deleted:
			parts = append(parts, e.Prefix+"?")
		case e.Prefix != "":
			parts = append(parts, e.Prefix+"*")
		case e.Deleted:
			parts = append(parts, e.Key+"~")
		default:
			parts = append(parts, e.Key)
		}
	}
	if truncated {
		parts = append(parts, "+")
	}
	return strings.Join(parts, " ")
}

func TestList(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "")
	live := []string{"a", "a/1", "a/2", "a/b/1", "b", "c/x", "c/y", "d\x00", "d\x00z", "é/1", "photos/2024/jan.jpg", "photos/2024/feb.jpg", "photos/2025/x"}
	dead := []string{"a/3", "gone/1", "gone/2", "d"}
	for _, k := range live {
		if _, err := s.PutManifest(ctx, obj("bk", k, 1, nodes3, "p-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range dead {
		if _, err := s.PutManifest(ctx, tomb("bk", k, 2)); err != nil {
			t.Fatal(err)
		}
	}
	// Same keys in another bucket, and in a bucket whose name extends "bk",
	// must never leak into bucket bk.
	for _, b := range []string{"bj", "bk\x00", "bkk"} {
		if _, err := s.PutManifest(ctx, obj(b, "a/zz", 1, nodes3, "q-"+b)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		q    ListQuery
		want string
	}{
		{ListQuery{}, "a a/1 a/2 a/3~ a/b/1 b c/x c/y d~ d\x00 d\x00z gone/1~ gone/2~ photos/2024/feb.jpg photos/2024/jan.jpg photos/2025/x é/1"},
		{ListQuery{Delimiter: "/"}, "a a/* b c/* d~ d\x00 d\x00z photos/* é/*"}, // gone/ holds only tombstones
		{ListQuery{Prefix: "a/", Delimiter: "/"}, "a/1 a/2 a/3~ a/b/*"},
		{ListQuery{Prefix: "photos/", Delimiter: "/"}, "photos/2024/* photos/2025/*"},
		{ListQuery{Prefix: "photos/20", Delimiter: "/"}, "photos/2024/* photos/2025/*"},
		{ListQuery{Prefix: "photos/2024/", Delimiter: "/"}, "photos/2024/feb.jpg photos/2024/jan.jpg"},
		{ListQuery{Delimiter: "/", Limit: 3}, "a a/* b +"},
		{ListQuery{Delimiter: "/", After: "a/"}, "b c/* d~ d\x00 d\x00z photos/* é/*"},
		{ListQuery{Delimiter: "/", After: "a/1"}, "b c/* d~ d\x00 d\x00z photos/* é/*"}, // inside a listed prefix
		{ListQuery{Delimiter: "/", After: "a"}, "a/* b c/* d~ d\x00 d\x00z photos/* é/*"},
		{ListQuery{After: "c/x", Limit: 2}, "c/y d~ +"},
		{ListQuery{After: "d"}, "d\x00 d\x00z gone/1~ gone/2~ photos/2024/feb.jpg photos/2024/jan.jpg photos/2025/x é/1"},
		{ListQuery{Prefix: "d"}, "d~ d\x00 d\x00z"},
		{ListQuery{Prefix: "d", Delimiter: "\x00"}, "d~ d\x00*"},
		{ListQuery{Prefix: "zzz"}, ""},
		{ListQuery{Prefix: "c/", After: "b"}, "c/x c/y"},                   // After below prefix
		{ListQuery{Prefix: "c/", After: "c/y"}, ""},                        // After at the end
		{ListQuery{Prefix: "a", Delimiter: "/2"}, "a a/1 a/2* a/3~ a/b/1"}, // multi-byte delimiter
		{ListQuery{Limit: 17}, "a a/1 a/2 a/3~ a/b/1 b c/x c/y d~ d\x00 d\x00z gone/1~ gone/2~ photos/2024/feb.jpg photos/2024/jan.jpg photos/2025/x é/1"},
		{ListQuery{Limit: 16}, "a a/1 a/2 a/3~ a/b/1 b c/x c/y d~ d\x00 d\x00z gone/1~ gone/2~ photos/2024/feb.jpg photos/2024/jan.jpg photos/2025/x +"},
	}
	for _, c := range cases {
		c.q.Bucket = "bk"
		es, tr, err := s.List(ctx, c.q)
		if err != nil {
			t.Fatalf("%+v: %v", c.q, err)
		}
		if got := render(es, tr); got != c.want {
			t.Errorf("List(%+v)\n got  %q\n want %q", c.q, got, c.want)
		}
	}
	es, _, _ := s.List(ctx, ListQuery{Bucket: "bk", Prefix: "b"})
	if len(es) != 1 || es[0].Size != 100 || es[0].ETag != "etag-1" || es[0].Version != ver(1) || es[0].Code != "rs-2-1" {
		t.Errorf("entry fields: %+v", es)
	}
	if _, _, err := s.List(ctx, ListQuery{}); !errors.Is(err, ErrInvalidQuery) {
		t.Errorf("empty bucket: got %v", err)
	}
}

// With Unsure, a common prefix with no live key but a tombstone over
// previous versions (a delete not yet confirmed) is named, marked
// Deleted; one with only settled tombstones is not; one with a live key
// is named live. Without Unsure neither kind of dead prefix is named.
func TestListUnsurePrefix(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "")
	put := func(m *Manifest) {
		t.Helper()
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	put(obj("bk", "a/1", 1, nodes3, "p-a1"))
	put(tomb("bk", "gone/1", 2))                 // a tombstone alone: settled
	put(obj("bk", "half/1", 1, nodes3, "p-h1"))  // deleted, the delete not confirmed:
	put(tomb("bk", "half/1", 2))                 // the object stays under it
	put(obj("bk", "mixed/0", 1, nodes3, "p-m0")) // one key deleted,
	put(tomb("bk", "mixed/0", 2))                // one live
	put(obj("bk", "mixed/1", 1, nodes3, "p-m1"))
	put(obj("bk", "z", 1, nodes3, "p-z")) // a key beside them
	for _, c := range []struct {
		q    ListQuery
		want string
	}{
		{ListQuery{Delimiter: "/"}, "a/* mixed/* z"},
		{ListQuery{Delimiter: "/", Unsure: true}, "a/* half/? mixed/* z"},
		{ListQuery{Delimiter: "/", Unsure: true, After: "half/"}, "mixed/* z"},
		{ListQuery{Delimiter: "/", Unsure: true, Limit: 2}, "a/* half/? +"},
		{ListQuery{Unsure: true}, "a/1 gone/1~ half/1~ mixed/0~ mixed/1 z"}, // no delimiter: keys as ever
	} {
		c.q.Bucket = "bk"
		es, tr, err := s.List(ctx, c.q)
		if err != nil {
			t.Fatalf("%+v: %v", c.q, err)
		}
		if got := render(es, tr); got != c.want {
			t.Errorf("List(%+v)\n got  %q\n want %q", c.q, got, c.want)
		}
	}
}

// oracleList is the listing semantics spelled out by brute force.
func oracleList(keys map[string]bool, q ListQuery) []ListEntry {
	var sorted []string
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []ListEntry
	seen := map[string]bool{}
	for _, k := range sorted {
		if !strings.HasPrefix(k, q.Prefix) {
			continue
		}
		if q.Delimiter != "" {
			if i := strings.Index(k[len(q.Prefix):], q.Delimiter); i >= 0 {
				cp := k[:len(q.Prefix)+i+len(q.Delimiter)]
				if cp > q.After && !seen[cp] && keys[k] {
					// emitted at the position of its first live key; fix order below
					seen[cp] = true
					out = append(out, ListEntry{Prefix: cp})
				}
				continue
			}
		}
		if k > q.After {
			out = append(out, ListEntry{Key: k, Deleted: !keys[k]})
		}
	}
	name := func(e ListEntry) string { return e.Key + e.Prefix }
	slices.SortFunc(out, func(a, b ListEntry) int { return strings.Compare(name(a), name(b)) })
	return out
}

// TestListMatchesOracle lists random key sets with random queries, in pages,
// and checks that the pages concatenate to the oracle's answer.
func TestListMatchesOracle(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	letters := []string{"a", "b", "/", "-", "\x00", "\xff"}
	randKey := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(5) {
			b.WriteString(letters[rng.IntN(len(letters))])
		}
		return b.String()
	}
	for round := range 20 {
		s := openMem(t, nil, "")
		keys := map[string]bool{} // key -> live
		for i := range 60 {
			k := randKey()
			live := rng.IntN(4) != 0
			var m *Manifest
			if live {
				m = obj("b", k, int64(i+1), nodes3, "p")
			} else {
				m = tomb("b", k, int64(i+1))
			}
			if _, err := s.PutManifest(ctx, m); err != nil {
				t.Fatal(err)
			}
			keys[k] = live
		}
		for range 30 {
			q := ListQuery{Bucket: "b"}
			if rng.IntN(2) == 0 {
				q.Prefix = randKey()[:1]
			}
			if rng.IntN(2) == 0 {
				q.Delimiter = letters[rng.IntN(len(letters))]
			}
			want := oracleList(keys, q)
			pageSize := 1 + rng.IntN(7)
			var got []ListEntry
			for pages := 0; ; pages++ {
				pq := q
				pq.Limit = pageSize
				if len(got) > 0 {
					pq.After = got[len(got)-1].Key + got[len(got)-1].Prefix
				}
				es, tr, err := s.List(ctx, pq)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) > pageSize || (tr && len(es) != pageSize) {
					t.Fatalf("page of %d with limit %d, truncated=%v", len(es), pageSize, tr)
				}
				got = append(got, es...)
				if !tr {
					break
				}
				if pages > 100 {
					t.Fatal("listing does not terminate")
				}
			}
			strip := func(es []ListEntry) []ListEntry {
				var out []ListEntry
				for _, e := range es {
					out = append(out, ListEntry{Key: e.Key, Prefix: e.Prefix, Deleted: e.Deleted})
				}
				return out
			}
			if g := strip(got); !reflect.DeepEqual(g, want) {
				t.Fatalf("round %d query %+v page %d:\n got  %q\n want %q", round, q, pageSize, render(g, false), render(want, false))
			}
		}
	}
}

// A listing row carries every field the gateway shows or merges by, for
// the current version and each previous one, although List decodes only
// those fields of a manifest (listFields) and none of its parts, user
// metadata or inline data.
func TestListEntryFields(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "")
	full := func(ts int64, etag string) *Manifest {
		m := obj("b", "k", ts, nodes3, fmt.Sprintf("p%d", ts))
		m.ETag, m.StorageClass, m.ContentType = etag, "REDUCED_REDUNDANCY", "text/plain"
		m.Modified = time.Unix(ts, 123456789).UTC()
		m.UserMeta = map[string]string{"color": "blue"}
		m.Headers = map[string]string{"Cache-Control": "no-cache"}
		m.Tags = map[string]string{"t": "v"}
		m.Versioned = true
		return m
	}
	older, newer := full(10, "etag-old"), full(20, "etag-new")
	small := inline("b", "k", 5, "tiny object")
	for _, m := range []*Manifest{small, older, newer} {
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	es, _, err := s.List(ctx, ListQuery{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	row := func(m *Manifest, id string) ListEntry {
		return ListEntry{Key: "k", Version: m.Version, Deleted: m.Deleted, Size: m.Size, ETag: m.ETag,
			StorageClass: m.StorageClass, Modified: m.Modified, Code: m.Code, VersionID: id}
	}
	want := row(newer, newer.Version.String())
	want.Previous = []ListEntry{row(older, older.Version.String()), row(small, "")}
	if len(es) != 1 || !reflect.DeepEqual(es[0], want) {
		t.Fatalf("listed\n%+v\nwant\n%+v", es, want)
	}
}

// BenchmarkList lists a page of 1,000 keys of striped objects (rs-6-3:
// nine placement servers, one part) as one shard server does for each
// listing page.
func BenchmarkList(b *testing.B) {
	ctx := context.Background()
	s, err := Open("db", Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	nodes := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"}
	for i := range 1000 {
		m := obj("b", fmt.Sprintf("meta/p%03d/o%05d", i%100, i), int64(i+1), nodes, fmt.Sprintf("part-%d", i))
		m.Code, m.UserMeta = "rs-6-3", map[string]string{"origin": "bench"}
		if _, err := s.PutManifest(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		es, _, err := s.List(ctx, ListQuery{Bucket: "b", Limit: 1000})
		if err != nil || len(es) != 1000 {
			b.Fatal(len(es), err)
		}
	}
}
