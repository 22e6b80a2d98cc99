package metadata

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

var nodes5 = []string{"n1", "n2", "n3", "n4", "n5"}

// digestOf builds self's digests over the current manifests ms.
func digestOf(self string, ms []*Manifest) *Digests {
	d := NewDigests(self)
	for _, m := range ms {
		d.Toggle(m)
	}
	return d
}

func sampleManifests(n int) []*Manifest {
	var out []*Manifest
	for i := range n {
		out = append(out, obj("b", fmt.Sprintf("key-%04d", i), int64(100+i), nodes5, fmt.Sprintf("p%d", i)))
	}
	return out
}

// The same set gives the same sums, in whatever order it was added.
func TestDigestSameSetsEqual(t *testing.T) {
	ms := sampleManifests(500)
	a := digestOf("n1", ms)
	shuffled := slices.Clone(ms)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	b := digestOf("n1", shuffled)
	for _, peer := range nodes5[1:] {
		if d := DiffRanges(a.Peer(peer), b.Peer(peer)); len(d) != 0 {
			t.Errorf("peer %s: equal sets differ in ranges %v", peer, d)
		}
	}
	// n1's sums for n2 are n2's sums for n1: both hold the same set.
	if d := DiffRanges(a.Peer("n2"), digestOf("n2", ms).Peer("n1")); len(d) != 0 {
		t.Errorf("n1 for n2 and n2 for n1 differ in ranges %v", d)
	}
	if *a.Peer("n9") != (RangeSums{}) {
		t.Error("sums for a peer nothing is shared with are not zero")
	}
}

// One difference between two servers' sets shows in exactly the range of
// its key, or nowhere when the key is not in the shared set.
func TestDigestOneDifference(t *testing.T) {
	base := sampleManifests(300)
	target := base[137]
	tests := []struct {
		name    string
		change  func(*Manifest) *Manifest // n2's manifest of target (nil: n2 lacks it)
		differs bool
	}{
		{"newer version", func(m *Manifest) *Manifest { c := *m; c.Version.TS++; return &c }, true},
		{"other writer", func(m *Manifest) *Manifest { c := *m; c.Version.Writer = "gw2"; return &c }, true},
		{"missing", func(*Manifest) *Manifest { return nil }, true},
		{"tombstone instead", func(m *Manifest) *Manifest {
			c := *m
			c.Deleted, c.Version.TS = true, m.Version.TS+1
			return &c
		}, true},
		{"placed without n1", func(m *Manifest) *Manifest {
			c := *m
			c.Placement, c.Version.TS = []string{"n2", "n3", "n4", "n6", "n7"}, m.Version.TS+1
			return &c
		}, true},
		{"same version, other fields", func(m *Manifest) *Manifest { c := *m; c.ETag = "other"; return &c }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var theirs []*Manifest
			for _, m := range base {
				if m == target {
					m = tc.change(m)
				}
				if m != nil {
					theirs = append(theirs, m)
				}
			}
			got := DiffRanges(digestOf("n1", base).Peer("n2"), digestOf("n2", theirs).Peer("n1"))
			var want []int
			if tc.differs {
				want = []int{KeyRange(target.Bucket, target.Key)}
			}
			if !slices.Equal(got, want) {
				t.Errorf("differing ranges %v, want %v", got, want)
			}
		})
	}
}

// Keys spread over the ranges: no range holds a large share, and keys
// that differ in their last byte land in different ranges.
func TestKeyRangeSpreads(t *testing.T) {
	seq := map[int]bool{}
	for i := range 200 {
		seq[KeyRange("b", fmt.Sprintf("k%03d", i))] = true
	}
	if len(seq) < 180 {
		t.Errorf("200 keys k000-k199 fell in %d ranges", len(seq))
	}
	count := map[int]int{}
	for i := range 100000 {
		count[KeyRange("bucket", fmt.Sprintf("prefix-%d/object-%d", i%100, i))]++
	}
	if len(count) < DigestRanges*9/10 {
		t.Errorf("100,000 keys fell in %d of %d ranges", len(count), DigestRanges)
	}
	for r, n := range count {
		if n > 100 {
			t.Errorf("range %d holds %d of 100,000 keys (mean %d)", r, n, 100000/DigestRanges)
		}
	}
}

// The store's sums, kept by every change of a current manifest (put,
// overwrite, delete, rollback, version removal), equal the sums rebuilt
// from its manifests at Open, and the sums of a fresh count; its range
// entries list exactly the shared manifests of a range.
func TestStoreDigestIncrementalEqualsRebuild(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	var want []*Manifest // current manifests at the end
	put := func(m *Manifest) {
		t.Helper()
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		put(obj("b", fmt.Sprintf("k%03d", i), 10, nodes5, fmt.Sprintf("a%d", i)))
	}
	for i := range 200 {
		key := fmt.Sprintf("k%03d", i)
		switch i % 5 {
		case 0: // overwritten
			m := obj("b", key, 20, nodes5, fmt.Sprintf("b%d", i))
			put(m)
			want = append(want, m)
		case 1: // deleted
			put(tomb("b", key, 20))
		case 2: // overwritten, then the overwrite rolled back
			put(obj("b", key, 20, nodes5, fmt.Sprintf("c%d", i)))
			if _, err := s.RollBack(ctx, "b", key, ver(20)); err != nil {
				t.Fatal(err)
			}
			want = append(want, obj("b", key, 10, nodes5, fmt.Sprintf("a%d", i)))
		case 3: // moved off n1 by a repair
			put(obj("b", key, 21, []string{"n2", "n3", "n4", "n5", "n6"}, fmt.Sprintf("a%d", i)))
		case 4: // its only version removed
			if _, err := s.DeleteVersion(ctx, "b", key, "", false); err != nil {
				t.Fatal(err)
			}
		}
	}
	fresh := digestOf("n1", want)
	for _, peer := range []string{"n2", "n5", "n6"} {
		if d := DiffRanges(s.RangeDigest(peer), fresh.Peer(peer)); len(d) != 0 {
			t.Errorf("peer %s: kept sums differ from a fresh count in ranges %v", peer, d)
		}
	}
	kept := s.RangeDigest("n2")
	s.Close()
	s2 := openMem(t, fs, "n1")
	if d := DiffRanges(s2.RangeDigest("n2"), kept); len(d) != 0 {
		t.Errorf("sums rebuilt at Open differ from the kept ones in ranges %v", d)
	}

	var all []int
	for r := range DigestRanges {
		all = append(all, r)
	}
	entries, err := s2.RangeEntries(ctx, "n2", all)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, fmt.Sprintf("%s/%s@%d", e.Bucket, e.Key, e.Version.TS))
	}
	var exp []string
	for _, m := range want {
		exp = append(exp, fmt.Sprintf("%s/%s@%d", m.Bucket, m.Key, m.Version.TS))
	}
	slices.Sort(got)
	slices.Sort(exp)
	if !slices.Equal(got, exp) {
		t.Errorf("entries of every range:\n%v\nwant\n%v", got, exp)
	}
	one := KeyRange("b", want[0].Key)
	entries, err = s2.RangeEntries(ctx, "n2", []int{one})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if KeyRange(e.Bucket, e.Key) != one {
			t.Errorf("entry %s/%s listed in range %d, its range is %d", e.Bucket, e.Key, one, KeyRange(e.Bucket, e.Key))
		}
	}
	if !slices.ContainsFunc(entries, func(e RangeEntry) bool { return e.Key == want[0].Key }) {
		t.Errorf("range %d's entries %v miss %s", one, entries, want[0].Key)
	}
}

// A store written before the range index existed gets it at Open.
func TestRangeIndexBuiltAtOpen(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	m := obj("b", "k", 10, nodes5, "p")
	if _, err := s.PutManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	// As an older binary left it: no index, no marker.
	if err := s.db.DeleteRange([]byte{nsRange}, []byte{nsRange + 1}, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := openMem(t, fs, "n1")
	entries, err := s2.RangeEntries(ctx, "n3", []int{KeyRange("b", "k")})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Key != "k" {
		t.Errorf("entries after Open: %v, want k", entries)
	}
}

// BenchmarkOpenRebuild measures Open over 100,000 manifests: the scan
// that rebuilds the stats and the range sums, and, for a store without
// the range index (written by an older binary), builds the index too.
//
//	go test -run '^$' -bench BenchmarkOpenRebuild -benchtime 3x ./metadata
func BenchmarkOpenRebuild(b *testing.B) {
	const n = 100000
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n1"})
	if err != nil {
		b.Fatal(err)
	}
	place := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"}
	for i := range n {
		m := obj("bench", fmt.Sprintf("prefix-%03d/object-%07d", i%1000, i), 10, place, fmt.Sprintf("part-%d", i))
		if _, err := s.PutManifest(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	for _, withIndex := range []bool{true, false} {
		b.Run(fmt.Sprintf("index=%v", withIndex), func(b *testing.B) {
			for range b.N {
				if !withIndex {
					b.StopTimer()
					s, err := Open("db", Options{FS: fs, NodeID: "n1"})
					if err != nil {
						b.Fatal(err)
					}
					if err := s.db.DeleteRange([]byte{nsRange}, []byte{nsRange + 1}, nil); err != nil {
						b.Fatal(err)
					}
					s.Close()
					b.StartTimer()
				}
				s, err := Open("db", Options{FS: fs, NodeID: "n1"})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
		})
	}
}

// TestRootSeesEveryDifference: the root of two digests is equal exactly
// when every range is, including differences in two ranges that cancel
// in a XOR of the ranges; and a sum prints and parses back.
func TestRootSeesEveryDifference(t *testing.T) {
	var a, b RangeSums
	if a.Root() != b.Root() {
		t.Fatal("equal digests, different roots")
	}
	a[7] = Sum{1, 2}
	if a.Root() == b.Root() {
		t.Error("one range differs, same root")
	}
	b[7] = Sum{1, 2}
	if a.Root() != b.Root() {
		t.Error("equal again, different roots")
	}
	// The same change in two ranges cancels in a XOR of all ranges.
	a[1], a[2] = Sum{5, 5}, Sum{5, 5}
	if a.Root() == b.Root() {
		t.Error("two ranges differ, same root")
	}
	r := a.Root()
	got, err := ParseSum(r.String())
	if err != nil || got != r {
		t.Errorf("ParseSum(%s) = %v, %v", r, got, err)
	}
	if _, err := ParseSum("xyz"); err == nil {
		t.Error("ParseSum accepted a bad sum")
	}
}

// RangeRoot follows every change of the sums it stands for: a write
// shared with the peer changes it, its removal brings it back, and a
// write the peer does not share leaves it as it was.
func TestRangeRootFollowsChanges(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	root := func() Sum {
		t.Helper()
		r := s.RangeRoot("n2")
		if want := s.RangeDigest("n2").Root(); r != want {
			t.Fatalf("RangeRoot %v, want the digest's root %v", r, want)
		}
		return r
	}
	empty := root()
	if _, err := s.PutManifest(ctx, obj("b", "k", 10, nodes3, "p1")); err != nil {
		t.Fatal(err)
	}
	one := root()
	if one == empty {
		t.Fatal("a manifest shared with n2 left the root as it was")
	}
	if _, err := s.PutManifest(ctx, obj("b", "other", 10, []string{"n1", "n3", "n4"}, "p2")); err != nil {
		t.Fatal(err)
	}
	if root() != one {
		t.Fatal("a manifest n2 does not share changed its root")
	}
	if _, err := s.PutManifest(ctx, tomb("b", "k", 20)); err != nil {
		t.Fatal(err)
	}
	if root() != empty {
		t.Fatal("with the shared manifest deleted, the root is not the empty set's")
	}
}
