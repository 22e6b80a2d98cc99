package placement

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
)

// ErrNotEnoughNodes is returned when fewer distinct nodes exist than shards
// must be placed.
var ErrNotEnoughNodes = errors.New("placement: not enough nodes")

// Score is the rendezvous weight of node for key: FNV-1a over both, pushed
// through a 64-bit finalizer so that similar IDs spread well.
func Score(key, node string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(node))
	return mix64(h.Sum64())
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Order returns nodes sorted by descending rendezvous score for key. Ties,
// which need a 64-bit collision, break by node ID. Duplicate IDs are removed.
func Order(key string, nodes []string) []string {
	out := slices.Clone(nodes)
	slices.Sort(out)
	out = slices.Compact(out)
	scores := make(map[string]uint64, len(out))
	for _, n := range out {
		scores[n] = Score(key, n)
	}
	slices.SortStableFunc(out, func(a, b string) int {
		sa, sb := scores[a], scores[b]
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return 0
	})
	return out
}

// Choose returns the first n nodes of Order(key, live): the placement of a
// new stripe group, one shard per node, shard i on node i.
func Choose(key string, live []string, n int) ([]string, error) {
	o := Order(key, live)
	if len(o) < n {
		return nil, fmt.Errorf("%w: %d shards need %d servers, %d alive", ErrNotEnoughNodes, n, n, len(o))
	}
	return o[:n], nil
}

// Replacements returns up to want nodes to receive rebuilt shards of key:
// live nodes in rendezvous order that hold no shard of the stripe group
// (never two shards of one stripe on one server). Taking them in key order
// keeps readers, who walk the same order, close to the data.
func Replacements(key string, live, current []string, want int) []string {
	taken := make(map[string]bool, len(current))
	for _, c := range current {
		taken[c] = true
	}
	var out []string
	for _, n := range Order(key, live) {
		if len(out) == want {
			break
		}
		if !taken[n] {
			out = append(out, n)
		}
	}
	return out
}
