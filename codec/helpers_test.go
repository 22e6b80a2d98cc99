package codec

import (
	"math/rand"
	"testing"
)

// stripe returns an encoded stripe of c with chunk bytes per shard and
// pseudo-random data.
func stripe(t testing.TB, c Code, chunk int, seed int64) [][]byte {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	// Laid out as the gateway lays out a stripe (NewStripe): benchmarks
	// measure the buffers production encodes.
	sh := NewStripe(c.TotalShards(), int64(chunk))
	for i := range sh {
		if i < c.DataShards() {
			rng.Read(sh[i])
		}
	}
	if err := c.Encode(sh); err != nil {
		t.Fatalf("%s: encode: %v", c.Name(), err)
	}
	return sh
}

func mustParse(t testing.TB, name string) Regenerating {
	t.Helper()
	c, err := Parse(name)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	r, ok := c.(Regenerating)
	if !ok {
		t.Fatalf("%s is not Regenerating", name)
	}
	return r
}

// erasurePatterns returns all subsets of [0,n) of size 1..maxT, or a random
// sample of limit of them (with the all-parity and all-data-first patterns
// always included) when limit > 0.
func erasurePatterns(n, maxT, limit int, rng *rand.Rand) [][]int {
	var out [][]int
	for t := 1; t <= maxT; t++ {
		out = append(out, combinations(seq(n), t)...)
	}
	if limit > 0 && len(out) > limit {
		rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		out = append(out[:limit], seq(maxT), seq(n)[n-maxT:])
	}
	return out
}
