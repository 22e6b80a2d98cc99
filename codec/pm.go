package codec

import (
	"fmt"
	"sync"
)

// PM is the pm-k-m code: a product-matrix MSR code (Rashmi, Shah, Kumar
// 2011) with d = n-1 helpers, each sending one sub-chunk (a dot product of
// its alpha sub-chunks with the failed node's phi vector) for a single
// repair. It needs a low rate, m >= k-1.
//
// Construction and on-disk format (FormatVersion 1):
//   - base code (n', k', d') = (2m+1, m+1, 2m) with alpha = m, so d' = 2k'-2;
//     it is shortened by i = m-k+1 systematic nodes fixed to zero, giving
//     (n, k, d) = (k+m, k, n-1) as CORE uses it;
//   - base node j has x_j = 2^j in GF(2^8) (0x11d), psi_j = (1, x_j, ...,
//     x_j^(2m-1)), phi_j = the first m entries, lambda_j = x_j^m;
//   - message [S1; S2] with S1, S2 symmetric m x m; free entries (r <= c)
//     numbered row-major, S1 first; node j stores psi_j^T [S1; S2];
//   - made systematic over base nodes 0..k'-1; base nodes 0..i-1 are the
//     virtual zeros, shard s is base node s+i;
//   - sub-chunk z of a shard chunk of L bytes is bytes [z*L/m, (z+1)*L/m).
type PM struct {
	k, m, n, alpha int
	shorten        int
	gen            [][]byte // n*alpha rows over k*alpha data symbols
	phi            [][]byte // phi vector of each shard
	enc            *linmap
	mu             sync.Mutex
	decoders       map[string]*linmap
	plans          *planner
}

var (
	_ Code         = (*PM)(nil)
	_ Regenerating = (*PM)(nil)
	_ Linear       = (*PM)(nil)
)

// NewPM returns the pm-k-m code.
func NewPM(k, m int) (*PM, error) {
	name := fmt.Sprintf("pm-%d-%d", k, m)
	if k < 2 || m < k-1 {
		return nil, fmt.Errorf("%w: %s: product-matrix MSR needs k >= 2 and m >= k-1 (rate <= ~1/2)", ErrBadParams, name)
	}
	alpha, kb := m, m+1
	nb := 2*m + 1
	if nb*alpha > maxRSShards*4 || nb > 255 {
		return nil, fmt.Errorf("%w: %s: too many sub-symbols", ErrBadParams, name)
	}
	x := make([]byte, nb)
	seen := map[byte]bool{}
	for j := range x {
		x[j] = gfPow(2, j)
		l := gfPow(x[j], alpha)
		if seen[l] {
			return nil, fmt.Errorf("%w: %s: lambda = x^%d not distinct in GF(256) for %d nodes", ErrBadParams, name, alpha, nb)
		}
		seen[l] = true
	}
	base := pmBaseGenerator(x, alpha)
	top, err := matInvert(base[:kb*alpha])
	if err != nil {
		return nil, fmt.Errorf("%w: %s: systematic form: %w", ErrBadParams, name, err)
	}
	sys := matMul(base, top)
	c := &PM{k: k, m: m, n: k + m, alpha: alpha, shorten: m - k + 1, decoders: map[string]*linmap{}}
	off := c.shorten * alpha
	c.gen = make([][]byte, c.n*alpha)
	for r := range c.gen {
		c.gen[r] = sys[off+r][off:]
	}
	c.phi = make([][]byte, c.n)
	for s := range c.phi {
		c.phi[s] = make([]byte, alpha)
		for r := range c.phi[s] {
			c.phi[s][r] = gfPow(x[s+c.shorten], r)
		}
	}
	if c.enc, err = newLinmap(c.gen[k*alpha:], k*alpha); err != nil {
		return nil, err
	}
	c.plans = newPlanner(c, func(f int) ([]int, []byte) { return nil, c.phi[f] }, false, true)
	return c, nil
}

// pmBaseGenerator returns the (n'*alpha) x (alpha*(alpha+1)) generator of
// the non-systematic product-matrix code.
func pmBaseGenerator(x []byte, alpha int) [][]byte {
	half := alpha * (alpha + 1) / 2
	sym := func(r, c int) int { // index of the free entry (min, max) of a symmetric matrix
		if r > c {
			r, c = c, r
		}
		return r*alpha - r*(r-1)/2 + (c - r)
	}
	g := newMatrix(len(x)*alpha, 2*half)
	for j, xj := range x {
		for col := 0; col < alpha; col++ {
			row := g[j*alpha+col]
			for r := 0; r < alpha; r++ {
				row[sym(r, col)] ^= gfPow(xj, r)
				row[half+sym(r, col)] ^= gfPow(xj, alpha+r)
			}
		}
	}
	return g
}

// Name is the code's name as Parse reads it, e.g. pm-5-5.
func (c *PM) Name() string { return fmt.Sprintf("pm-%d-%d", c.k, c.m) }

// DataShards is k, the number of data shards.
func (c *PM) DataShards() int { return c.k }

// ParityShards is m, the number of parity shards.
func (c *PM) ParityShards() int { return c.m }

// TotalShards is n = k + m.
func (c *PM) TotalShards() int { return c.n }

// SubChunks is alpha, the sub-chunks per shard that repair reads selectively.
func (c *PM) SubChunks() int { return c.alpha }

// ShardMultiple is what every shard's length must be a multiple of (alpha).
func (c *PM) ShardMultiple() int { return c.alpha }

// Phi returns the repair vector of shard f: for a single repair of f, each
// helper sends sum_s Phi(f)[s] * its sub-chunk s.
func (c *PM) Phi(f int) []byte { return append([]byte(nil), c.phi[f]...) }

// RepairPlan returns the plan that rebuilds the failed shards from repair sub-chunks of the others (cached per failure set).
func (c *PM) RepairPlan(failed []int) (*Plan, error) { return c.plans.plan(failed) }

// Coefficients returns, for rebuilding shard lost from survivors, the coefficients each survivor applies to its sub-chunks (see Regenerating).
func (c *PM) Coefficients(lost int, survivors []int) ([][][]byte, error) {
	return c.plans.coefficients(lost, survivors)
}

// subChunks appends the alpha sub-chunks of each shard.
func subChunks(dst [][]byte, shards [][]byte, alpha int) [][]byte {
	for _, s := range shards {
		sc := len(s) / alpha
		for z := 0; z < alpha; z++ {
			dst = append(dst, s[z*sc:(z+1)*sc])
		}
	}
	return dst
}

// Encode computes the parity shards from the k data shards; every parity shard must be allocated with the data shards' length.
func (c *PM) Encode(shards [][]byte) error {
	if len(shards) != c.n {
		return fmt.Errorf("%w: got %d, want %d", ErrShardCount, len(shards), c.n)
	}
	for i := c.k; i < c.n; i++ {
		if shards[i] == nil {
			return fmt.Errorf("%w: parity shard %d is not allocated", ErrShardSize, i)
		}
	}
	size, err := checkShards(c, shards)
	if err != nil || size == 0 {
		return err
	}
	in := subChunks(make([][]byte, 0, c.k*c.alpha), shards[:c.k], c.alpha)
	out := subChunks(make([][]byte, 0, c.m*c.alpha), shards[c.k:], c.alpha)
	c.enc.apply(in, out)
	return nil
}

// Reconstruct fills every nil shard from the others; at least k must be present.
func (c *PM) Reconstruct(shards [][]byte) error { return c.ReconstructSome(shards, nil) }

// ReconstructSome fills the nil shards whose required entry is true (all nil shards when required is nil).
func (c *PM) ReconstructSome(shards [][]byte, required []bool) error {
	size, err := checkShards(c, shards)
	if err != nil {
		return err
	}
	if required != nil && len(required) != c.n {
		return fmt.Errorf("%w: required has %d entries, want %d", ErrShardCount, len(required), c.n)
	}
	var surv, lost []int
	for i, s := range shards {
		switch {
		case s != nil:
			if len(surv) < c.k {
				surv = append(surv, i)
			}
		case required == nil || required[i]:
			lost = append(lost, i)
		}
	}
	if len(surv) < c.k {
		return fmt.Errorf("%w: %d shards present, need %d", ErrTooFewShards, len(surv), c.k)
	}
	if len(lost) == 0 {
		return nil
	}
	if size == 0 {
		return fmt.Errorf("%w: present shards are empty", ErrShardSize)
	}
	lm, err := c.decoder(surv, lost)
	if err != nil {
		return err
	}
	outs := make([][]byte, len(lost))
	for i, f := range lost {
		shards[f] = make([]byte, size)
		outs[i] = shards[f]
	}
	in := make([][]byte, 0, c.k*c.alpha)
	for _, s := range surv {
		in = subChunks(in, shards[s:s+1], c.alpha)
	}
	lm.apply(in, subChunks(make([][]byte, 0, len(lost)*c.alpha), outs, c.alpha))
	return nil
}

// decoder returns the matrix taking the sub-chunks of k survivors to those
// of the lost shards: G_lost * G_surv^-1.
func (c *PM) decoder(surv, lost []int) (*linmap, error) {
	key := setKey(surv) + "|" + setKey(lost)
	c.mu.Lock()
	lm, ok := c.decoders[key]
	c.mu.Unlock()
	if ok {
		return lm, nil
	}
	a := c.alpha
	sub := make([][]byte, 0, c.k*a)
	for _, s := range surv {
		sub = append(sub, c.gen[s*a:(s+1)*a]...)
	}
	inv, err := matInvert(sub)
	if err != nil {
		return nil, fmt.Errorf("codec: %s: survivors %v: %w", c.Name(), surv, err)
	}
	var rows [][]byte
	for _, f := range lost {
		rows = append(rows, matMul(c.gen[f*a:(f+1)*a], inv)...)
	}
	if lm, err = newLinmap(rows, c.k*a); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.decoders) >= maxCached {
		clear(c.decoders)
	}
	c.decoders[key] = lm
	c.mu.Unlock()
	return lm, nil
}
