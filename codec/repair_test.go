package codec

import (
	"encoding/json"
	"math/rand"
	"slices"
	"testing"
)

// TestRankIdentities: any k shards determine the data (MDS), checked on the
// generator by rank, for every k-subset of small codes and a sample of large.
func TestRankIdentities(t *testing.T) {
	skipUnderRace(t)
	for _, tc := range []struct {
		name  string
		limit int
	}{{"clay-4-2", 0}, {"clay-6-3", 0}, {"clay-5-3", 0}, {"pm-4-4", 0}, {"pm-3-2", 0}, {"rs-4-2", 0},
		{"clay-8-4", 40}, {"clay-8-8", 20}, {"clay-10-10", 10}, {"pm-10-10", 40}, {"clay-10-4", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.name)
			if testing.Short() && c.SubChunks() > 64 {
				t.Skip("large alpha")
			}
			g, err := planOf(c).generator()
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(1))
			sets := combinations(seq(c.TotalShards()), c.DataShards())
			if tc.limit > 0 && len(sets) > tc.limit {
				rng.Shuffle(len(sets), func(i, j int) { sets[i], sets[j] = sets[j], sets[i] })
				sets = sets[:tc.limit]
			}
			for _, set := range sets {
				b := newBasis(g.width, 0)
				for _, a := range set {
					for z := 0; z < g.alpha; z++ {
						b.insert(append([]byte(nil), g.row(a, z)...))
					}
				}
				if b.rank() != g.width {
					t.Fatalf("shards %v have rank %d, want %d", set, b.rank(), g.width)
				}
			}
		})
	}
}

func planOf(c Code) *planner {
	switch c := c.(type) {
	case *Clay:
		return c.plans
	case *PM:
		return c.plans
	case *RS:
		return c.planner()
	}
	panic("unknown code")
}

// TestSingleRepair: every shard of every code is rebuilt from exactly
// (n-1)*beta sub-chunks (d*beta, the MSR optimum), byte for byte. Clay
// helpers send raw sub-chunks only.
func TestSingleRepair(t *testing.T) {
	skipUnderRace(t)
	for _, name := range []string{"clay-2-2", "clay-4-2", "clay-5-3", "clay-6-3", "clay-8-4", "clay-10-4", "clay-8-8", "clay-10-10", "pm-3-3", "pm-4-4", "pm-8-8", "pm-10-10", "pm-3-2"} {
		t.Run(name, func(t *testing.T) {
			c := mustParse(t, name)
			sh := stripe(t, c, 2*c.SubChunks(), 4)
			n, a := c.TotalShards(), c.SubChunks()
			beta := a / c.ParityShards()
			_, isClay := c.(*Clay)
			for f := 0; f < n; f++ {
				p, _, err := executeRepair(c, sh, []int{f})
				if err != nil {
					t.Fatal(err)
				}
				if p.Method != MethodMSR || p.Downloads() != (n-1)*beta || len(p.Helpers) != n-1 {
					t.Fatalf("shard %d: %s plan with %d downloads from %d helpers, want msr %d from %d", f, p.Method, p.Downloads(), len(p.Helpers), (n-1)*beta, n-1)
				}
				for _, h := range p.Helpers {
					if h.Outputs() != beta || (isClay && h.Coef != nil) {
						t.Fatalf("shard %d: helper %d sends %d sub-chunks (coef %v), want %d raw", f, h.Shard, h.Outputs(), h.Coef != nil, beta)
					}
				}
			}
		})
	}
}

// TestMultiRepair executes the plan of every failure pattern (small codes)
// or a sample (large codes) and checks the bytes and the cut-set bound.
func TestMultiRepair(t *testing.T) {
	skipUnderRace(t)
	for _, tc := range []struct {
		name  string
		limit int
	}{{"clay-4-2", 0}, {"clay-6-3", 0}, {"clay-5-3", 0}, {"pm-4-4", 0}, {"pm-3-3", 0}, {"rs-4-2", 0},
		{"clay-8-4", 25}, {"clay-8-8", 25}, {"clay-10-10", 16}, {"clay-10-4", 3}, {"pm-8-8", 150}, {"pm-10-10", 150}} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.name)
			if testing.Short() && c.SubChunks() >= 100 {
				t.Skip("planning (20,10) and (14,10) cross-section patterns takes seconds")
			}
			sh := stripe(t, c, 2*c.SubChunks(), 5)
			rng := rand.New(rand.NewSource(6))
			maxT := c.ParityShards()
			if tc.limit > 0 {
				// Planning cross-section Clay patterns with many failures
				// takes seconds; the survey covers them.
				maxT = min(maxT, 4)
			}
			for _, f := range erasurePatterns(c.TotalShards(), maxT, tc.limit, rng) {
				p, sent, err := executeRepair(c, sh, f)
				if err != nil {
					t.Fatal(err)
				}
				bound := RepairBound(c.TotalShards(), c.DataShards(), len(f))
				ratio := float64(sent) / float64(c.DataShards()*len(sh[0]))
				if ratio < bound-1e-9 || ratio != p.Ratio() {
					t.Fatalf("%v: ratio %.4f (plan says %.4f), bound %.4f", f, ratio, p.Ratio(), bound)
				}
				if ratio > 1+1e-9 {
					t.Fatalf("%v: ratio %.4f above conventional repair", f, ratio)
				}
				if cl, ok := c.(*Clay); ok && len(f) < cl.q && cl.SameSection(f) && len(f) < c.DataShards() && (ratio-bound > 1e-9) {
					t.Fatalf("%v: same-section pattern at %.4f, bound %.4f", f, ratio, bound)
				}
				if _, ok := c.(*PM); ok && p.Method == MethodCORE && ratio-bound > 1e-9 {
					t.Fatalf("%v: good PM pattern at %.4f, bound %.4f", f, ratio, bound)
				}
				if p.Method == MethodVirtual {
					// CORE: a bad pattern costs what a good pattern of
					// t+1 failures costs, with one virtual failure.
					if len(p.Virtual) != 1 || ratio-RepairBound(c.TotalShards(), c.DataShards(), len(f)+1) > 1e-9 {
						t.Fatalf("%v: virtual plan %v at %.4f", f, p.Virtual, ratio)
					}
				}
			}
		})
	}
}

// TestCORETable pins the headline numbers of msr-codes.md §4.4 / §5.
func TestCORETable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed []int
		method string
		ratio  float64
	}{
		{"clay-10-10", []int{0, 10}, MethodAugmented, 0.424},
		{"clay-10-10", []int{0, 1}, MethodCORE, 0.36},
		{"clay-10-10", []int{0, 1, 10}, MethodAugmented, 0.559},
		{"clay-8-8", []int{0, 8}, MethodAugmented, 0.5078125},
		{"clay-6-3", []int{0, 3}, MethodAugmented, 0.8518518518518519},
		{"clay-8-4", []int{0, 4}, MethodAugmented, 0.71875},
		{"clay-8-4", []int{0, 1, 2}, MethodCORE, 0.84375},
		{"pm-10-10", []int{0, 5, 9}, MethodCORE, 0.51},
		// The bad PM patterns of t = 3 (2 of 1140 and 2 of 560), each
		// fixed by one virtual failure; they depend on the points x_i.
		{"pm-10-10", []int{1, 7, 10}, MethodVirtual, 0.64},
		{"pm-10-10", []int{8, 11, 17}, MethodVirtual, 0.64},
		{"pm-8-8", []int{1, 3, 4}, MethodVirtual, 0.75},
		{"pm-8-8", []int{10, 11, 13}, MethodVirtual, 0.75},
		{"clay-4-2", []int{0, 5}, MethodConventional, 1},
		{"rs-6-3", []int{2}, MethodConventional, 1},
	} {
		c := mustParse(t, tc.name)
		p, err := c.RepairPlan(tc.failed)
		if err != nil {
			t.Fatal(err)
		}
		if p.Method != tc.method || p.Ratio() != tc.ratio {
			t.Errorf("%s %v: %s at %v, want %s at %v", tc.name, tc.failed, p.Method, p.Ratio(), tc.method, tc.ratio)
		}
	}
}

// TestPlanJSON: a plan survives the wire and still repairs.
func TestPlanJSON(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed []int
	}{{"clay-6-3", []int{4}}, {"clay-6-3", []int{0, 3}}, {"pm-4-4", []int{1, 6}}, {"rs-4-2", []int{0, 5}}} {
		c := mustParse(t, tc.name)
		p, err := c.RepairPlan(tc.failed)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var q Plan
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatal(err)
		}
		sh := stripe(t, c, 4*c.SubChunks(), 7)
		sent := make([][]byte, len(q.Helpers))
		for i := range q.Helpers {
			sent[i], err = q.Helpers[i].Produce(q.SubChunks, sh[q.Helpers[i].Shard], nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(sent[i]) != q.Helpers[i].OutputLen(q.SubChunks, len(sh[0])) {
				t.Fatalf("helper output length %d, OutputLen %d", len(sent[i]), q.Helpers[i].OutputLen(q.SubChunks, len(sh[0])))
			}
		}
		out := make([][]byte, len(q.Failed))
		if err := q.Rebuild(len(sh[0]), sent, out); err != nil {
			t.Fatal(err)
		}
		for i, f := range q.Failed {
			if string(out[i]) != string(sh[f]) {
				t.Fatalf("%s %v: shard %d differs after JSON round trip", tc.name, tc.failed, f)
			}
		}
		sent[0] = sent[0][1:]
		if err := q.Rebuild(len(sh[0]), sent, out); err == nil {
			t.Fatal("short helper message accepted")
		}
	}
}

// TestPushChain rebuilds a lost shard hop by hop from k survivors.
func TestPushChain(t *testing.T) {
	for _, name := range []string{"rs-6-3", "clay-4-2", "clay-6-3", "pm-4-4", "pm-10-10"} {
		c := mustParse(t, name)
		lin := c.(Linear)
		sh := stripe(t, c, 3*c.SubChunks(), 8)
		rng := rand.New(rand.NewSource(9))
		for trial := 0; trial < 5; trial++ {
			perm := rng.Perm(c.TotalShards())
			lost, surv := perm[0], perm[1:1+c.DataShards()]
			co, err := lin.Coefficients(lost, surv)
			if err != nil {
				t.Fatal(err)
			}
			partial := make([]byte, len(sh[0]))
			for i, s := range surv {
				if err := PushStep(co[i], sh[s], partial); err != nil {
					t.Fatal(err)
				}
			}
			if string(partial) != string(sh[lost]) {
				t.Fatalf("%s: push chain for %d over %v differs", name, lost, surv)
			}
		}
		if _, err := lin.Coefficients(0, seq(c.DataShards())); err == nil {
			t.Fatalf("%s: lost shard among survivors accepted", name)
		}
	}
}

// TestPMGenerator: the symbolic encode (what the planner sees) equals the
// construction's generator.
func TestPMGenerator(t *testing.T) {
	c := mustParse(t, "pm-8-8").(*PM)
	g, err := c.plans.generator()
	if err != nil {
		t.Fatal(err)
	}
	for r := range c.gen {
		if !slices.Equal(g.rows[r], c.gen[r]) {
			t.Fatalf("row %d differs", r)
		}
	}
}

func TestRegistry(t *testing.T) {
	var r Registry
	a, err := r.RepairPlan("clay-6-3", []int{2, 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.RepairPlan("clay-6-3", []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if a != b || !slices.Equal(a.Failed, []int{1, 2}) {
		t.Fatal("plans are not cached per failure set")
	}
	if _, err := r.RepairPlan("clay-6-3", []int{0, 1, 2, 3}); err == nil {
		t.Fatal("4 failures of a 3-parity code accepted")
	}
	if _, err := r.Get("nope-1-1"); err == nil {
		t.Fatal("bad name accepted")
	}
}
