package codec

import (
	"fmt"
	"sync"

	"github.com/klauspost/reedsolomon"
)

// Clay is the clay-k-m code: a Clay (coupled-layer) MSR code with d = n-1
// helpers, built on a systematic scalar [n+nu, k+nu] MDS code per plane.
//
// On-disk format (FormatVersion 1), fixed so shards written today decode
// forever:
//   - q = m, nu = (q - n mod q) mod q virtual zero data nodes, t = (n+nu)/q,
//     alpha = q^t sub-chunks per shard chunk, beta = alpha/q.
//   - internal index: data i -> i, virtual -> k..k+nu-1, parity i -> i+nu;
//     node a sits at (x, y) = (a mod q, a div q).
//   - plane z has digits z_0..z_{t-1}, z_0 most significant (Ceph order);
//     sub-chunk z of a shard chunk of L bytes is bytes [z*L/alpha, (z+1)*L/alpha).
//   - inner code: jerasure reed_sol_van (k+nu, m, w=8), i.e. reedsolomon's
//     WithJerasureMatrix; pairwise transform: Ceph's jerasure (2,2) code
//     U_hi = C_hi + C_lo, U_lo = C_hi + 0x8f*C_lo, hi = larger x.
//
// So the layout matches Ceph's clay plugin with d = n-1 (unverified against
// Ceph itself; the known-answer vectors come from msr-codes.md §2.4).
type Clay struct {
	k, m, n     int
	q, nu, t    int
	alpha, beta int
	pw          []int    // pw[y] = q^(t-1-y), the weight of digit y
	inner       [][]byte // (k+nu+m) x (k+nu) generator of the inner code
	mu          sync.Mutex
	decoders    map[string]*innerDecoder
	runs        []runEncoder
	prog        *clayProgram
	zero        []byte // read-only zeros: the C of virtual nodes
	plans       *planner
	scratch     sync.Pool
}

// Pairwise-transform constants (Ceph's pft) and the inverses that solve it.
const (
	pftC   = 0x8f // U_lo = C_hi + pftC*C_lo
	pftInv = 0xf5 // 1/0x8f
	pftD   = 0x02 // 1/(1+0x8f) = 1/0x8e
)

// maxClayAlpha bounds the sub-packetization; beyond it shard chunks become
// impractically large (alpha sub-chunks of >= 4 KiB each).
const maxClayAlpha = 1024

var (
	_ Code         = (*Clay)(nil)
	_ Regenerating = (*Clay)(nil)
	_ Linear       = (*Clay)(nil)
)

// NewClay returns the clay-k-m code.
func NewClay(k, m int) (*Clay, error) {
	name := fmt.Sprintf("clay-%d-%d", k, m)
	if k < 2 || m < 2 {
		return nil, fmt.Errorf("%w: %s: need k >= 2 and m >= 2 (m = 1 has no repair planes)", ErrBadParams, name)
	}
	n, q := k+m, m
	nu := (q - n%q) % q
	if n+nu > maxRSShards {
		return nil, fmt.Errorf("%w: %s: inner code has %d shards, at most %d (never Leopard mode)", ErrBadParams, name, n+nu, maxRSShards)
	}
	t := (n + nu) / q
	alpha := 1
	for i := 0; i < t; i++ {
		alpha *= q
		if alpha > maxClayAlpha {
			return nil, fmt.Errorf("%w: %s: sub-packetization q^t = %d^%d exceeds %d", ErrBadParams, name, q, t, maxClayAlpha)
		}
	}
	c := &Clay{k: k, m: m, n: n, q: q, nu: nu, t: t, alpha: alpha, beta: alpha / q,
		decoders: map[string]*innerDecoder{}}
	c.pw = make([]int, t)
	for y := range c.pw {
		c.pw[y] = alpha / q
		for i := 0; i < y; i++ {
			c.pw[y] /= q
		}
	}
	inner, err := jerasureGenerator(k+nu, m)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadParams, name, err)
	}
	c.inner = inner
	c.plans = newPlanner(c, c.selection, true, false)
	return c, nil
}

// jerasureGenerator returns the systematic generator of reedsolomon's
// jerasure-compatible code, read back by encoding the identity.
func jerasureGenerator(k, m int) ([][]byte, error) {
	enc, err := reedsolomon.New(k, m, reedsolomon.WithJerasureMatrix())
	if err != nil {
		return nil, err
	}
	shards := newMatrix(k+m, k)
	for i := 0; i < k; i++ {
		shards[i][i] = 1
	}
	if err := enc.Encode(shards); err != nil {
		return nil, err
	}
	// shards[a][j] is the coefficient of data j in node a.
	return shards, nil
}

// Name is the code's name as Parse reads it, e.g. clay-6-3.
func (c *Clay) Name() string { return fmt.Sprintf("clay-%d-%d", c.k, c.m) }

// DataShards is k, the number of data shards.
func (c *Clay) DataShards() int { return c.k }

// ParityShards is m, the number of parity shards.
func (c *Clay) ParityShards() int { return c.m }

// TotalShards is n = k + m.
func (c *Clay) TotalShards() int { return c.n }

// SubChunks is alpha, the sub-chunks per shard that repair reads selectively.
func (c *Clay) SubChunks() int { return c.alpha }

// ShardMultiple is what every shard's length must be a multiple of (alpha).
func (c *Clay) ShardMultiple() int { return c.alpha }

// Params returns q, nu, t and beta (alpha is SubChunks).
func (c *Clay) Params() (q, nu, t, beta int) { return c.q, c.nu, c.t, c.beta }

// internal maps a shard index to the internal (data | virtual | parity) index.
func (c *Clay) internal(shard int) int {
	if shard < c.k {
		return shard
	}
	return shard + c.nu
}

func (c *Clay) digit(z, y int) int { return z / c.pw[y] % c.q }

// zeros returns n zero bytes, shared and never written.
func (c *Clay) zeros(n int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.zero) < n {
		c.zero = make([]byte, max(n, 2*len(c.zero)))
	}
	return c.zero[:n]
}

// swap returns z with digit y replaced by x.
func (c *Clay) swap(z, y, x int) int { return z + (x-c.digit(z, y))*c.pw[y] }

// selection is the single-repair download for shard f: planes whose digit
// y_f equals x_f (beta of them).
func (c *Clay) selection(f int) ([]int, []byte) {
	a := c.internal(f)
	x, y := a%c.q, a/c.q
	planes := make([]int, 0, c.beta)
	for z := 0; z < c.alpha; z++ {
		if c.digit(z, y) == x {
			planes = append(planes, z)
		}
	}
	return planes, nil
}

// SameSection reports whether all failed shards share one y-section, the
// case Clay repairs at the cut-set bound when there are at most q-1.
func (c *Clay) SameSection(failed []int) bool {
	for _, f := range failed {
		if c.internal(f)/c.q != c.internal(failed[0])/c.q {
			return false
		}
	}
	return true
}

// RepairPlan returns the plan that rebuilds the failed shards from repair sub-chunks of the others (cached per failure set).
func (c *Clay) RepairPlan(failed []int) (*Plan, error) { return c.plans.plan(failed) }

// Coefficients returns, for rebuilding shard lost from survivors, the coefficients each survivor applies to its sub-chunks (see Regenerating).
func (c *Clay) Coefficients(lost int, survivors []int) ([][][]byte, error) {
	return c.plans.coefficients(lost, survivors)
}
