package gateway

import (
	"fmt"
	"testing"

	"github.com/regen-s3/regen/metadata"
)

// TestDecide checks the read rules of readManifest on hand-made answers
// of a key's first nine servers (s0..s8), rs-6-3: write quorum 7, read
// quorum 6, a version visible once 6 hold it.
func TestDecide(t *testing.T) {
	servers := make([]string, 9)
	for i := range servers {
		servers[i] = fmt.Sprintf("s%d", i)
	}
	man := func(ts int64, deleted bool) *metadata.Manifest {
		return &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: ts, Writer: "gw"},
			Deleted: deleted, Code: "rs-6-3", Placement: servers}
	}
	v1, v2, tomb := man(1, false), man(2, false), man(3, true)
	// answer: per server, the versions it holds ("" = not found, "x" =
	// silent: dead or failed).
	type answer map[string][]*metadata.Manifest
	build := func(holds answer, silent ...string) *manifestVote {
		v := &manifestVote{byVersion: map[metadata.Version]*metadata.Manifest{}, votes: map[metadata.Version]int{}, answered: map[string]bool{}}
		isSilent := map[string]bool{}
		for _, s := range silent {
			isSilent[s] = true
		}
		for _, s := range servers {
			if isSilent[s] {
				v.unreachable++
				continue
			}
			v.answered[s] = true
			ms := holds[s]
			for _, m := range ms {
				v.byVersion[m.Version] = m
				v.votes[m.Version]++
			}
		}
		return v
	}
	holding := func(n int, ms ...*metadata.Manifest) answer {
		a := answer{}
		for i := 0; i < n; i++ {
			a[servers[i]] = append(a[servers[i]], ms...)
		}
		return a
	}
	merge := func(as ...answer) answer {
		out := answer{}
		for _, a := range as {
			for s, ms := range a {
				out[s] = append(out[s], ms...)
			}
		}
		return out
	}
	l := &layer{maxN: 9, minK: 6}
	for _, tc := range []struct {
		name   string
		vote   *manifestVote
		want   verdict
		wantTS int64
	}{
		{"all hold v1", build(holding(9, v1)), verdictFound, 1},
		{"no one holds it", build(nil), verdictAbsent, 0},
		{"four answer none, five silent", build(nil, "s4", "s5", "s6", "s7", "s8"), verdictAbsent, 0},
		{"three answer none, six silent: a visible version may hide", build(nil, "s3", "s4", "s5", "s6", "s7", "s8"), verdictUnsure, 0},
		{"case 1: five hold v1, two silent, two never got it", build(holding(5, v1), "s5", "s6"), verdictUnsure, 0},
		{"v2 on two servers, no one silent: never acknowledged", build(merge(holding(9, v1), holding(2, v2))), verdictFound, 1},
		{"v2 on four, three silent: may be acknowledged, v1 would be stale", build(merge(holding(9, v1), holding(4, v2)), "s6", "s7", "s8"), verdictUnsure, 0},
		{"v2 on three, two silent: cannot be visible", build(merge(holding(9, v1), holding(3, v2)), "s7", "s8"), verdictFound, 1},
		{"v2 on four, two silent: may be visible", build(merge(holding(9, v1), holding(4, v2)), "s7", "s8"), verdictUnsure, 0},
		{"v2 on six: readable and newest", build(merge(holding(9, v1), holding(6, v2))), verdictFound, 2},
		{"tombstone newest", build(merge(holding(9, v1), holding(7, tomb))), verdictFound, 3},
		{"v1 readable with three silent", build(holding(9, v1), "s0", "s1", "s2"), verdictFound, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, got := l.decide(tc.vote, servers)
			if got != tc.want {
				t.Fatalf("verdict %d, want %d", got, tc.want)
			}
			if tc.want == verdictFound && m.Version.TS != tc.wantTS {
				t.Fatalf("found version %d, want %d", m.Version.TS, tc.wantTS)
			}
		})
	}
}

// TestClockObserve: a clock far behind moves past every version it saw,
// leaving room for a repair switch (TS+1) below its next version.
func TestClockObserve(t *testing.T) {
	c := &clock{writer: "gw", offset: -1e12}
	seen := metadata.Version{TS: 4e18, Writer: "other"}
	c.observe(seen)
	v := c.next()
	if !seen.Less(v) || v.TS <= seen.TS+1 {
		t.Fatalf("next %v after observing %v", v, seen)
	}
	if w := c.next(); !v.Less(w) {
		t.Fatalf("versions not increasing: %v then %v", v, w)
	}
}

// TestNoFoundThroughSilence: the newest acknowledged version may be held
// by the silent ones among the key's first nine servers (two killed, the
// rest called dead by gossip or too slow). s7, s8 and four servers
// further along the order hold an older version: six votes, readable. No
// answer names the newer version, so it is not weighed; returning the
// older one while six or more of the first nine are silent could be a
// stale read. With five silent, a version visible on six of the first
// nine has a holder among those that answered.
func TestNoFoundThroughSilence(t *testing.T) {
	servers := make([]string, 13)
	for i := range servers {
		servers[i] = fmt.Sprintf("s%d", i)
	}
	first := servers[:9]
	v1 := &metadata.Manifest{Bucket: "b", Key: "k", Version: metadata.Version{TS: 1, Writer: "gw"},
		Code: "rs-6-3", Placement: servers[7:]}
	l := &layer{maxN: 9, minK: 6}
	for _, tc := range []struct {
		silent int // s0..s(silent-1) do not answer
		want   verdict
	}{{7, verdictUnsure}, {6, verdictUnsure}, {5, verdictFound}} {
		v := newVote()
		for i, id := range servers {
			switch {
			case i < tc.silent:
				v.fail(nil)
			case i < 7:
				v.add(l, id, nil, false) // answers: holds no version
			default:
				v.add(l, id, []*metadata.Manifest{v1}, false)
			}
		}
		m, got := l.decide(v, first)
		if got != tc.want {
			t.Fatalf("%d of the first nine silent: verdict %d (%v), want %d", tc.silent, got, m, tc.want)
		}
	}
}
