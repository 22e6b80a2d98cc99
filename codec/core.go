package codec

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// planner is the CORE engine shared by all codes: generic GF(2^8) linear
// algebra over the k*alpha data symbols. A code contributes its single-repair
// download (selection) and how bad patterns may be widened; everything else
// (download sets, solvability, repair matrices, fallbacks, caching) is here.
type planner struct {
	code Code
	// selection is the single-node repair download of any helper for
	// failed shard f: a plane set (optimal access, raw sub-chunks) or one
	// coefficient row over alpha. nil means the code has no regenerating
	// repair (RS) and every multi-shard repair is conventional.
	selection func(f int) (planes []int, coef []byte)
	// augment enables greedy plane augmentation and pruning for bad
	// patterns of optimal-access codes (Clay).
	augment bool
	// virtual enables CORE virtual failures for bad patterns.
	virtual bool

	genOnce sync.Once
	gen     *generator
	genErr  error

	mu    sync.Mutex
	plans map[string]*Plan
	coefs map[string][][][]byte
}

func newPlanner(c Code, sel func(int) ([]int, []byte), augment, virtual bool) *planner {
	return &planner{code: c, selection: sel, augment: augment, virtual: virtual,
		plans: map[string]*Plan{}, coefs: map[string][][][]byte{}}
}

func (p *planner) generator() (*generator, error) {
	p.genOnce.Do(func() { p.gen, p.genErr = buildGenerator(p.code) })
	return p.gen, p.genErr
}

// maxCached bounds each per-pattern cache (decoders, coefficients). Real
// clusters see few erasure patterns; a flood of distinct ones (a fuzzer, a
// survey) must not grow memory without limit, so a full cache is simply
// dropped. Plans (up to ~100 KB each for (20,10) CORE) get a smaller cap.
const (
	maxCached = 4096
	maxPlans  = 1024
)

// download is one sub-chunk a helper sends: raw sub-chunk z, or (z < 0) the
// combination coef of its sub-chunks.
type download struct {
	h, z int
	coef []byte
}

func (g *generator) functional(d download) []byte {
	if d.z >= 0 {
		return g.row(d.h, d.z)
	}
	return g.combo(d.h, d.coef)
}

func setKey(xs []int) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}

// normalizeFailed validates a failure set and returns it sorted.
func normalizeFailed(c Code, failed []int) ([]int, error) {
	f := slices.Clone(failed)
	sort.Ints(f)
	if len(f) == 0 {
		return nil, fmt.Errorf("%w: empty failure set", ErrBadPlan)
	}
	for i, x := range f {
		if x < 0 || x >= c.TotalShards() || (i > 0 && f[i-1] == x) {
			return nil, fmt.Errorf("%w: failure set %v: shards must be distinct and in [0,%d)", ErrBadPlan, failed, c.TotalShards())
		}
	}
	if len(f) > c.ParityShards() {
		return nil, fmt.Errorf("%w: %d failures, %s tolerates %d", ErrTooFewShards, len(f), c.Name(), c.ParityShards())
	}
	return f, nil
}

func survivors(n int, failed []int) []int {
	var s []int
	for a := 0; a < n; a++ {
		if !slices.Contains(failed, a) {
			s = append(s, a)
		}
	}
	return s
}

// RepairBound is the CORE / cut-set lower bound on the bandwidth of
// rebuilding t shards of an (n,k) MSR code from all n-t survivors, as a
// fraction of the stripe's data: t(n-t)/(k(n-k)) for t < k, else 1.
func RepairBound(n, k, t int) float64 {
	if t >= k {
		return 1
	}
	return float64(t*(n-t)) / float64(k*(n-k))
}

// plan returns the cached plan for failed, computing it on first use.
func (p *planner) plan(failed []int) (*Plan, error) {
	f, err := normalizeFailed(p.code, failed)
	if err != nil {
		return nil, err
	}
	key := setKey(f)
	p.mu.Lock()
	pl, ok := p.plans[key]
	p.mu.Unlock()
	if ok {
		return pl, nil
	}
	pl, err = p.compute(f)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if old, ok := p.plans[key]; ok {
		pl = old // a concurrent caller won; plans are deterministic
	} else {
		if len(p.plans) >= maxPlans {
			clear(p.plans)
		}
		p.plans[key] = pl
	}
	p.mu.Unlock()
	return pl, nil
}

func (p *planner) compute(failed []int) (*Plan, error) {
	g, err := p.generator()
	if err != nil {
		return nil, err
	}
	k, alpha := p.code.DataShards(), p.code.SubChunks()
	helpers := survivors(p.code.TotalShards(), failed)
	var best *Plan
	if p.selection != nil && len(failed) < k {
		method := MethodCORE
		if len(failed) == 1 {
			method = MethodMSR
		}
		base := p.baseline(failed, helpers)
		best = p.solvePlan(g, base, failed, method, nil)
		if best == nil && p.virtual {
			best = p.tryVirtual(g, failed, helpers)
		}
		if best == nil && p.augment {
			best = p.tryAugment(g, failed, helpers, base)
		}
	}
	if best == nil || best.Downloads() >= k*alpha {
		best = p.conventional(g, failed, helpers)
	} else {
		p.chain(g, best)
	}
	if best == nil {
		return nil, fmt.Errorf("codec: %s: no repair plan for %v (code is not MDS?)", p.code.Name(), failed)
	}
	return best, nil
}

// baseline is CORE's download set: every helper sends its single-repair
// download for every failed shard, deduplicated (Clay's plane sets overlap).
func (p *planner) baseline(failed, helpers []int) []download {
	var planes []int
	var coefs [][]byte
	for _, f := range failed {
		pl, c := p.selection(f)
		planes = append(planes, pl...)
		if c != nil {
			coefs = append(coefs, c)
		}
	}
	sort.Ints(planes)
	planes = slices.Compact(planes)
	var ds []download
	for _, h := range helpers {
		for _, z := range planes {
			ds = append(ds, download{h: h, z: z})
		}
		for _, c := range coefs {
			ds = append(ds, download{h: h, z: -1, coef: c})
		}
	}
	return ds
}

// solve decides whether the targets (all sub-chunks of failed) lie in the
// span of the downloads and, if so, returns the repair matrix over the
// downloads. Downloads that turn out linearly dependent on earlier ones get
// all-zero columns, so the insertion order doubles as a pruning order.
func solve(g *generator, ds []download, failed []int) ([][]byte, bool) {
	n := len(ds)
	b := newBasis(g.width, n)
	for i, d := range ds {
		v := make([]byte, g.width+n)
		copy(v, g.functional(d))
		v[g.width+i] = 1
		b.insert(v)
	}
	relay := make([][]byte, 0, len(failed)*g.alpha)
	for _, f := range failed {
		for z := 0; z < g.alpha; z++ {
			v := make([]byte, g.width+n)
			copy(v, g.row(f, z))
			b.reduce(v)
			if b.leading(v) >= 0 {
				return nil, false
			}
			relay = append(relay, v[g.width:])
		}
	}
	return relay, true
}

// solvePlan solves and packages a plan, dropping unused downloads.
func (p *planner) solvePlan(g *generator, ds []download, failed []int, method string, virtual []int) *Plan {
	relay, ok := solve(g, ds, failed)
	if !ok {
		return nil
	}
	return p.pack(ds, relay, failed, method, virtual)
}

// pack groups the used downloads by helper (ascending shard, then sub-chunk)
// and permutes the repair matrix columns into that wire order.
func (p *planner) pack(ds []download, relay [][]byte, failed []int, method string, virtual []int) *Plan {
	var used []int
	for j := range ds {
		for _, row := range relay {
			if row[j] != 0 {
				used = append(used, j)
				break
			}
		}
	}
	sort.SliceStable(used, func(a, b int) bool {
		da, db := ds[used[a]], ds[used[b]]
		if da.h != db.h {
			return da.h < db.h
		}
		return da.z < db.z
	})
	pl := &Plan{Code: p.code.Name(), Version: FormatVersion, DataShards: p.code.DataShards(),
		SubChunks: p.code.SubChunks(), Failed: failed, Method: method, Virtual: virtual}
	for _, j := range used {
		d := ds[j]
		if len(pl.Helpers) == 0 || pl.Helpers[len(pl.Helpers)-1].Shard != d.h {
			pl.Helpers = append(pl.Helpers, HelperTask{Shard: d.h})
		}
		t := &pl.Helpers[len(pl.Helpers)-1]
		if d.z < 0 {
			t.Coef = append(t.Coef, d.coef)
			continue
		}
		if n := len(t.Runs); n > 0 && t.Runs[n-1].Start+t.Runs[n-1].Count == d.z {
			t.Runs[n-1].Count++
		} else {
			t.Runs = append(t.Runs, Run{Start: d.z, Count: 1})
		}
	}
	pl.Relay = newMatrix(len(relay), len(used))
	for r, row := range relay {
		for c, j := range used {
			pl.Relay[r][c] = row[j]
		}
	}
	return pl
}

// conventional downloads k whole shards from the first k helpers.
func (p *planner) conventional(g *generator, failed, helpers []int) *Plan {
	var ds []download
	for _, h := range helpers[:p.code.DataShards()] {
		for z := 0; z < g.alpha; z++ {
			ds = append(ds, download{h: h, z: z})
		}
	}
	return p.solvePlan(g, ds, failed, MethodConventional, nil)
}

// tryVirtual is CORE's fix for bad patterns: treat one (then two) more
// survivors as failed, so the remaining helpers send their downloads for the
// widened pattern, and keep the cheapest good result.
func (p *planner) tryVirtual(g *generator, failed, helpers []int) *Plan {
	m := p.code.ParityShards()
	var best *Plan
	for extra := 1; extra <= 2 && best == nil && len(failed)+extra <= m && len(failed)+extra < p.code.DataShards(); extra++ {
		for _, vs := range combinations(helpers, extra) {
			wide := append(slices.Clone(failed), vs...)
			sort.Ints(wide)
			hs := survivors(p.code.TotalShards(), wide)
			pl := p.solvePlan(g, p.baseline(wide, hs), failed, MethodVirtual, vs)
			if pl != nil && (best == nil || pl.Downloads() < best.Downloads()) {
				best = pl
			}
		}
	}
	return best
}

// combinations lists the r-subsets of xs in lexicographic order.
func combinations(xs []int, r int) [][]int {
	var out [][]int
	idx := make([]int, r)
	var rec func(start, depth int)
	rec = func(start, depth int) {
		if depth == r {
			c := make([]int, r)
			for i, j := range idx {
				c[i] = xs[j]
			}
			out = append(out, c)
			return
		}
		for i := start; i < len(xs); i++ {
			idx[depth] = i
			rec(i+1, depth+1)
		}
	}
	rec(0, 0)
	return out
}
