package metadata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func openMem(t *testing.T, fs vfs.FS, node string) *Store {
	t.Helper()
	if fs == nil {
		fs = vfs.NewMem()
	}
	s, err := Open("db", Options{FS: fs, NodeID: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ver(ts int64) Version { return Version{TS: ts, Writer: "gw1"} }

// obj builds a valid striped manifest with one part per id, placed on nodes.
func obj(bucket, key string, ts int64, nodes []string, partIDs ...string) *Manifest {
	m := &Manifest{Bucket: bucket, Key: key, Version: ver(ts), Code: "rs-2-1", ChunkSize: 1024,
		Placement: nodes, ETag: fmt.Sprintf("etag-%d", ts), Modified: time.Unix(ts, 0).UTC()}
	for i, id := range partIDs {
		m.Parts = append(m.Parts, Part{Number: i + 1, ID: id, Size: 100, ShardCRC: make([]uint32, len(nodes))})
		m.Size += 100
	}
	return m
}

func tomb(bucket, key string, ts int64) *Manifest {
	return &Manifest{Bucket: bucket, Key: key, Version: ver(ts), Deleted: true}
}

func inline(bucket, key string, ts int64, data string) *Manifest {
	return &Manifest{Bucket: bucket, Key: key, Version: ver(ts), Size: int64(len(data)), Inline: []byte(data)}
}

var nodes3 = []string{"n1", "n2", "n3"}

func TestKeyEncodingPreservesOrder(t *testing.T) {
	alphabet := []string{"", "\x00", "\x01", "\xff", "a", "a\x00", "a\x00\x01", "a\x01", "a/", "ab", "b", "\x00\xff", "é"}
	type bk struct{ b, k string }
	var all []bk
	for _, b := range alphabet {
		for _, k := range alphabet {
			all = append(all, bk{b, k})
		}
	}
	for _, x := range all {
		for _, y := range all {
			want := strings.Compare(x.b, y.b)
			if want == 0 {
				want = strings.Compare(x.k, y.k)
			}
			got := bytes.Compare(manifestKey(x.b, x.k), manifestKey(y.b, y.k))
			if got != want {
				t.Fatalf("order of (%q,%q) vs (%q,%q): got %d want %d", x.b, x.k, y.b, y.k, got, want)
			}
		}
		b, rest, err := readEscaped(manifestKey(x.b, x.k)[1:])
		if err != nil || b != x.b || string(rest) != x.k {
			t.Fatalf("decode (%q,%q): got (%q,%q,%v)", x.b, x.k, b, rest, err)
		}
	}
}

func TestPrefixSuccessor(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a", "b"}, {"a/", "a0"}, {"a\xff", "b"}, {"\xff\xff", ""}, {"", ""},
	} {
		if got := string(prefixSuccessor([]byte(c.in))); got != c.want {
			t.Errorf("prefixSuccessor(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestGCKeyRoundTrip(t *testing.T) {
	in := GCItem{FileID: "ab\x00cd", Idx: 7, Due: time.Unix(1700000000, 123)}
	out, err := parseGCKey(gcKey(in))
	if err != nil || out.FileID != in.FileID || out.Idx != in.Idx || !out.Due.Equal(in.Due) {
		t.Fatalf("got %+v, %v; want %+v", out, err, in)
	}
}

func TestPutManifestNewerWinsAnyOrder(t *testing.T) {
	ctx := context.Background()
	// Versions 1..6 of one key: objects, a tombstone and an inline object.
	versions := []*Manifest{
		obj("b", "k", 1, nodes3, "p1"),
		obj("b", "k", 2, nodes3, "p2"),
		tomb("b", "k", 3),
		inline("b", "k", 4, "tiny"),
		obj("b", "k", 5, nodes3, "p5a", "p5b"),
		{Bucket: "b", Key: "k", Version: Version{TS: 5, Writer: "gw2"}, Deleted: true}, // same TS, later writer wins
	}
	newest := versions[len(versions)-1]
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 30 {
		s := openMem(t, nil, "n1")
		order := rng.Perm(len(versions))
		var storedCount int
		for _, i := range order {
			res, err := s.PutManifest(ctx, versions[i])
			if err != nil {
				t.Fatal(err)
			}
			if res.Stored {
				storedCount++
			}
			if res.Current == nil {
				t.Fatalf("trial %d: nil Current", trial)
			}
			// Retrying the same write is a no-op.
			again, err := s.PutManifest(ctx, versions[i])
			if err != nil || again.Stored {
				t.Fatalf("trial %d: retry stored=%v err=%v", trial, again.Stored, err)
			}
		}
		got, err := s.GetManifest(ctx, "b", "k")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != newest.Version || !got.Deleted {
			t.Fatalf("trial %d order %v: current %+v, want version %v", trial, order, got.Version, newest.Version)
		}
		// Every superseded version is kept (fewer than MaxPreviousKept), and
		// their parts stay indexed, until they are dropped.
		_, prev, err := s.Versions(ctx, "b", "k")
		if err != nil || len(prev) != len(versions)-1 || prev[0].Version != versions[4].Version || prev[4].Version != versions[0].Version {
			t.Fatalf("trial %d order %v: previous %v, %v", trial, order, prev, err)
		}
		owned := func(id string) bool { refs, _ := s.PartOwners(ctx, id); return len(refs) > 0 }
		if !owned("p1") || !owned("p2") || !owned("p5a") || !owned("p5b") {
			t.Fatalf("trial %d order %v: want p1, p2, p5a, p5b indexed", trial, order)
		}
		if _, err := s.DropPrevious(ctx, "b", "k", newest.Version, nil); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"p1", "p2", "p5a", "p5b"} {
			if owned(id) {
				t.Fatalf("trial %d order %v: part %s still owned after DropPrevious", trial, order, id)
			}
		}
		st, _ := s.Stats(ctx)
		if st != (Stats{Tombstones: 1}) {
			t.Fatalf("trial %d: stats %+v", trial, st)
		}
		if storedCount < 1 {
			t.Fatalf("trial %d: nothing stored", trial)
		}
	}
}

func TestPutManifestResult(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n2")
	v1 := obj("b", "k", 1, nodes3, "p1")
	v2 := obj("b", "k", 2, nodes3, "p2")
	res, err := s.PutManifest(ctx, v1)
	if err != nil || !res.Stored || res.Replaced != nil {
		t.Fatalf("first put: %+v %v", res, err)
	}
	res, err = s.PutManifest(ctx, v2)
	if err != nil || !res.Stored || res.Replaced == nil || res.Replaced.Parts[0].ID != "p1" {
		t.Fatalf("second put: %+v %v", res, err)
	}
	res, err = s.PutManifest(ctx, v1)
	if err != nil || res.Stored || res.Current.Version != v2.Version || res.Replaced != nil {
		t.Fatalf("stale put: %+v %v", res, err)
	}
	refs, err := s.PartOwners(ctx, "p2")
	if err != nil || !slices.Equal(refs, []ObjectRef{{"b", "k"}}) {
		t.Fatalf("owners of p2: %v %v", refs, err)
	}
	st, _ := s.Stats(ctx)
	// v1, replaced, is kept (and counted) until v2 is confirmed.
	if st != (Stats{Objects: 1, Bytes: 100, Shards: 1, Previous: 1, PreviousBytes: 100, PreviousShards: 1}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestPutManifestRejectsInvalid(t *testing.T) {
	s := openMem(t, nil, "")
	_, err := s.PutManifest(context.Background(), &Manifest{Bucket: "b", Key: "k"})
	if !errors.Is(err, ErrInvalidManifest) {
		t.Fatalf("got %v, want ErrInvalidManifest", err)
	}
}

func TestGetManifestNotFoundAndInline(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "")
	if _, err := s.GetManifest(ctx, "b", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
	if _, err := s.PutManifest(ctx, inline("b", "k", 1, "hello")); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetManifest(ctx, "b", "k")
	if err != nil || string(m.Inline) != "hello" {
		t.Fatalf("got %+v %v", m, err)
	}
	// Replacing it with a striped object drops the inline data.
	if _, err := s.PutManifest(ctx, obj("b", "k", 2, nodes3, "p")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.get(inlineKey("b", "k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("inline data left behind: %v", err)
	}
}

func TestReopenKeepsDataAndStats(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n3"})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range []*Manifest{obj("b", "x", 1, nodes3, "p1", "p2"), tomb("b", "y", 1), inline("b", "z", 1, "abc")} {
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(i, err)
		}
	}
	if _, err := s.PutBucket(ctx, &Bucket{Name: "b", Version: ver(1)}); err != nil {
		t.Fatal(err)
	}
	want, _ := s.Stats(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, "n3")
	got, _ := s.Stats(ctx)
	if got != want || got != (Stats{Objects: 2, Tombstones: 1, Bytes: 203, Shards: 2}) {
		t.Fatalf("stats after reopen %+v, before %+v", got, want)
	}
	if m, err := s.GetManifest(ctx, "b", "z"); err != nil || string(m.Inline) != "abc" {
		t.Fatalf("inline after reopen: %+v %v", m, err)
	}
	if b, err := s.GetBucket(ctx, "b"); err != nil || b.Version != ver(1) {
		t.Fatalf("bucket after reopen: %+v %v", b, err)
	}
}

func TestBuckets(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "")
	put := func(b Bucket, wantStored bool) {
		t.Helper()
		stored, err := s.PutBucket(ctx, &b)
		if err != nil || stored != wantStored {
			t.Fatalf("PutBucket(%+v) = %v, %v; want stored=%v", b, stored, err, wantStored)
		}
	}
	put(Bucket{Name: "photos", Version: ver(2)}, true)
	put(Bucket{Name: "photos", Version: ver(1), Code: "old"}, false)
	put(Bucket{Name: "photos", Version: ver(3), Deleted: true}, true)
	put(Bucket{Name: "photos", Version: ver(2)}, false) // a late create cannot resurrect it
	put(Bucket{Name: "docs", Version: ver(1)}, true)
	if _, err := s.PutBucket(ctx, &Bucket{Name: "x"}); !errors.Is(err, ErrInvalidBucket) {
		t.Fatalf("zero version: got %v", err)
	}
	if _, err := s.GetBucket(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v", err)
	}
	all, err := s.ListBuckets(ctx)
	if err != nil || len(all) != 2 || all[0].Name != "docs" || all[1].Name != "photos" || !all[1].Deleted {
		t.Fatalf("ListBuckets = %+v, %v", all, err)
	}
}

func TestGCQueue(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "")
	t0 := time.Unix(1000, 0)
	for i, due := range []time.Duration{3, 1, 2, 10} {
		if err := s.EnqueueGC(ctx, fmt.Sprintf("f%d", i), i, t0.Add(due*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	due, err := s.DueGC(ctx, t0.Add(3*time.Second), 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range due {
		ids = append(ids, it.FileID)
	}
	if !slices.Equal(ids, []string{"f1", "f2", "f0"}) {
		t.Fatalf("due = %v, want f1 f2 f0 (oldest first, f3 not due)", ids)
	}
	if lim, _ := s.DueGC(ctx, t0.Add(time.Hour), 2); len(lim) != 2 {
		t.Fatalf("limit not honoured: %v", lim)
	}
	if err := s.DoneGC(ctx, due[:2]...); err != nil {
		t.Fatal(err)
	}
	rest, _ := s.DueGC(ctx, t0.Add(time.Hour), 100)
	if len(rest) != 2 || rest[0].FileID != "f0" || rest[0].Idx != 0 || rest[1].FileID != "f3" {
		t.Fatalf("after DoneGC: %+v", rest)
	}
}
