package placement

import (
	"fmt"
	"slices"
	"testing"
)

func nodes(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("node-%02d", i))
	}
	return out
}

func TestOrderDeterministicAndComplete(t *testing.T) {
	all := nodes(12)
	a := Order("bucket/key", all)
	rev := slices.Clone(all)
	slices.Reverse(rev)
	b := Order("bucket/key", rev)
	if !slices.Equal(a, b) {
		t.Fatalf("order depends on input order: %v vs %v", a, b)
	}
	sorted := slices.Clone(a)
	slices.Sort(sorted)
	if !slices.Equal(sorted, all) {
		t.Fatalf("order lost or duplicated nodes: %v", a)
	}
}

// Removing a node must not reorder the others: this is what lets a GET walk
// the order over today's live nodes and still find yesterday's placement.
func TestOrderStableUnderRemoval(t *testing.T) {
	all := nodes(12)
	for k := range 200 {
		key := fmt.Sprintf("b/%d", k)
		full := Order(key, all)
		for _, gone := range []int{0, 3, 11} {
			var rest []string
			for _, n := range all {
				if n != all[gone] {
					rest = append(rest, n)
				}
			}
			want := slices.DeleteFunc(slices.Clone(full), func(s string) bool { return s == all[gone] })
			if got := Order(key, rest); !slices.Equal(got, want) {
				t.Fatalf("key %s: removing %s reordered: %v vs %v", key, all[gone], got, want)
			}
		}
	}
}

func TestChooseSpreadsLoad(t *testing.T) {
	all := nodes(12)
	first := map[string]int{}
	const keys = 12000
	for k := range keys {
		p, err := Choose(fmt.Sprintf("b/obj-%d", k), all, 9)
		if err != nil {
			t.Fatal(err)
		}
		first[p[0]]++
	}
	for _, n := range all {
		// Expect 1000 each; allow a generous band so the test checks
		// spread, not luck.
		if c := first[n]; c < 800 || c > 1200 {
			t.Errorf("node %s is first for %d of %d keys, want about %d", n, c, keys, keys/12)
		}
	}
}

func TestChooseTooFew(t *testing.T) {
	if _, err := Choose("k", nodes(5), 9); err == nil {
		t.Fatal("want ErrNotEnoughNodes")
	}
	if _, err := Choose("k", []string{"a", "a", "a"}, 2); err == nil {
		t.Fatal("duplicates must not count as distinct servers")
	}
}

func TestReplacementsAvoidCurrent(t *testing.T) {
	all := nodes(12)
	cur, _ := Choose("b/x", all, 9)
	got := Replacements("b/x", all, cur, 5)
	if len(got) != 3 {
		t.Fatalf("want the 3 free nodes, got %v", got)
	}
	for _, g := range got {
		if slices.Contains(cur, g) {
			t.Fatalf("replacement %s already holds a shard", g)
		}
	}
}
