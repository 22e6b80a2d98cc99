package codec

import (
	"fmt"
	"slices"
)

// Regenerating is implemented by every code of this package (RS included,
// where all plans are conventional). It is an optional interface, found by
// type assertion, so Code stays small.
type Regenerating interface {
	Code
	// RepairPlan returns the plan that rebuilds the failed shards from the
	// other n-|failed| shards: single-node MSR repair, CORE for several
	// failures (with virtual failures or Clay plane augmentation for bad
	// patterns), or conventional decoding when nothing saves bandwidth or
	// |failed| >= k. Plans are deterministic and cached per failure set;
	// callers must not modify them.
	RepairPlan(failed []int) (*Plan, error)
}

// Linear gives the coefficients that express a lost shard in terms of any k
// survivors, for PUSH chains: partial_i = partial_{i-1} + coef_i * local_i.
type Linear interface {
	Code
	// Coefficients returns, for each survivor (in the given order), an
	// alpha x alpha matrix: sub-chunk r of the lost shard is
	// sum_i sum_s coef[i][r][s] * sub-chunk s of survivors[i]. For RS alpha
	// is 1, so each entry is a single scalar. Apply with PushStep.
	Coefficients(lost int, survivors []int) ([][][]byte, error)
}

var (
	_ Regenerating = (*RS)(nil)
	_ Linear       = (*RS)(nil)
)

func (p *planner) coefficients(lost int, surv []int) ([][][]byte, error) {
	c := p.code
	k, a := c.DataShards(), c.SubChunks()
	if lost < 0 || lost >= c.TotalShards() {
		return nil, fmt.Errorf("%w: lost shard %d out of range", ErrBadPlan, lost)
	}
	if len(surv) != k {
		return nil, fmt.Errorf("%w: need exactly k = %d survivors, got %d", ErrBadPlan, k, len(surv))
	}
	for i, s := range surv {
		if s < 0 || s >= c.TotalShards() || s == lost || slices.Contains(surv[:i], s) {
			return nil, fmt.Errorf("%w: survivors %v must be distinct, in range and exclude %d", ErrBadPlan, surv, lost)
		}
	}
	key := fmt.Sprintf("%d:%s", lost, setKey(surv))
	p.mu.Lock()
	co, ok := p.coefs[key]
	p.mu.Unlock()
	if ok {
		return co, nil
	}
	g, err := p.generator()
	if err != nil {
		return nil, err
	}
	var ds []download
	for _, s := range surv {
		for z := 0; z < a; z++ {
			ds = append(ds, download{h: s, z: z})
		}
	}
	relay, ok := solve(g, ds, []int{lost})
	if !ok {
		return nil, fmt.Errorf("codec: %s: survivors %v do not decode shard %d (not MDS?)", c.Name(), surv, lost)
	}
	co = make([][][]byte, k)
	for i := range co {
		co[i] = newMatrix(a, a)
		for r := 0; r < a; r++ {
			copy(co[i][r], relay[r][i*a:(i+1)*a])
		}
	}
	p.mu.Lock()
	if len(p.coefs) >= maxCached {
		clear(p.coefs)
	}
	p.coefs[key] = co
	p.mu.Unlock()
	return co, nil
}
