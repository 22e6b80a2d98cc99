package codec

import (
	"crypto/subtle"
	"fmt"
)

// innerDecoder maps, for one erasure set, the stored sub-chunks C a plane
// needs straight to the U-domain sub-chunks of the erased nodes. The inner
// MDS decode U_E = D * U_S and the pairwise transforms U_a = C_a + g*C_b of
// the nodes read are linear, so they are folded into one matrix per plane and
// run as a single fused SIMD pass: no intermediate U of survivors is ever
// written. Virtual nodes contribute nothing (their C is zero).
type innerDecoder struct {
	planes []planeDecoder
}

type planeDecoder struct {
	in []cref // stored sub-chunks read, in column order
	lm *linmap
}

// cref names stored sub-chunk z of internal node a.
type cref struct{ a, z int }

func (c *Clay) innerDecoder(erased []int) (*innerDecoder, error) {
	key := setKey(erased)
	c.mu.Lock()
	d, ok := c.decoders[key]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	base, in, err := c.innerMatrix(erased)
	if err != nil {
		return nil, err
	}
	d = &innerDecoder{planes: make([]planeDecoder, c.alpha)}
	for z := range d.planes {
		if d.planes[z], err = c.planeDecoder(base, in, z); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	if len(c.decoders) >= maxCached {
		clear(c.decoders)
	}
	c.decoders[key] = d
	c.mu.Unlock()
	return d, nil
}

// innerMatrix returns the scalar decode matrix of the inner code from the
// first k+nu non-erased internal nodes (which it also returns).
func (c *Clay) innerMatrix(erased []int) ([][]byte, []int, error) {
	kk := c.k + c.nu
	isErased := make([]bool, c.n+c.nu)
	for _, a := range erased {
		isErased[a] = true
	}
	var in []int
	for a := 0; a < c.n+c.nu && len(in) < kk; a++ {
		if !isErased[a] {
			in = append(in, a)
		}
	}
	sub := make([][]byte, kk)
	for i, a := range in {
		sub[i] = c.inner[a]
	}
	inv, err := matInvert(sub)
	if err != nil {
		return nil, nil, fmt.Errorf("codec: %s inner decode %v: %w", c.Name(), erased, err)
	}
	rows := make([][]byte, len(erased))
	for i, a := range erased {
		rows[i] = matMul([][]byte{c.inner[a]}, inv)[0]
	}
	return rows, in, nil
}

func (c *Clay) isVirtual(a int) bool { return a >= c.k && a < c.k+c.nu }

// planeDecoder folds the pairwise transforms of plane z into base.
func (c *Clay) planeDecoder(base [][]byte, in []int, z int) (planeDecoder, error) {
	var pd planeDecoder
	col := map[cref]int{}
	rows := make([][]byte, len(base))
	add := func(r cref, j int, coef byte) {
		if c.isVirtual(r.a) {
			return
		}
		ci, ok := col[r]
		if !ok {
			ci = len(pd.in)
			col[r] = ci
			pd.in = append(pd.in, r)
			for i := range rows {
				rows[i] = append(rows[i], 0)
			}
		}
		for i := range rows {
			rows[i][ci] ^= gfMul(base[i][j], coef)
		}
	}
	for j, a := range in {
		x, y := a%c.q, a/c.q
		zy := c.digit(z, y)
		switch {
		case x == zy: // dot: U = C
			add(cref{a, z}, j, 1)
		case x > zy: // hi: U_hi = C_hi + C_lo
			add(cref{a, z}, j, 1)
			add(cref{y*c.q + zy, c.swap(z, y, x)}, j, 1)
		default: // lo: U_lo = C_hi + pftC*C_lo
			add(cref{a, z}, j, pftC)
			add(cref{y*c.q + zy, c.swap(z, y, x)}, j, 1)
		}
	}
	lm, err := newLinmap(rows, len(pd.in))
	pd.lm = lm
	return pd, err
}

// getScratch returns a buffer of n bytes (contents undefined).
func (c *Clay) getScratch(n int) *[]byte {
	if p, ok := c.scratch.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n)
	return &b
}

// decode is the layered decoder (msr-codes.md §2.4). cb[a] is the C buffer
// of internal node a (alpha*sc bytes); buffers of erased nodes are outputs,
// virtual nodes point at zeros. Planes are processed in increasing order of
// their intersection score so that every coupled partner needed is known:
// a survivor's partner in an erased node lies in a plane of lower score.
func (c *Clay) decode(cb [][]byte, erased []int, sc int) error {
	if len(erased) == 0 || sc == 0 {
		return nil
	}
	dec, err := c.innerDecoder(erased)
	if err != nil {
		return err
	}
	q, L := c.q, c.alpha*sc
	isErased := make([]bool, c.n+c.nu)
	for _, a := range erased {
		isErased[a] = true
	}
	ubuf := c.getScratch(len(erased) * L)
	defer c.scratch.Put(ubuf)
	u := make([][]byte, c.n+c.nu)
	for i, a := range erased {
		u[a] = (*ubuf)[i*L : (i+1)*L]
	}
	buckets := make([][]int, len(erased)+1)
	for z := 0; z < c.alpha; z++ {
		s := 0
		for _, a := range erased {
			if a%q == c.digit(z, a/q) {
				s++
			}
		}
		buckets[s] = append(buckets[s], z)
	}
	var in [][]byte
	out := make([][]byte, len(erased))
	for _, planes := range buckets {
		for _, z := range planes {
			pd := &dec.planes[z]
			in = in[:0]
			for _, r := range pd.in {
				in = append(in, cb[r.a][r.z*sc:(r.z+1)*sc])
			}
			for i, e := range erased {
				if e%q == c.digit(z, e/q) {
					// An erased dot has C = U, and no other plane
					// needs its U: write it in place.
					out[i] = cb[e][z*sc : (z+1)*sc]
				} else {
					out[i] = u[e][z*sc : (z+1)*sc]
				}
			}
			pd.lm.apply(in, out)
		}
		for _, z := range planes {
			for _, e := range erased {
				c.uncouple(cb, u, isErased, e, z, sc)
			}
		}
	}
	return nil
}

// uncouple computes C of erased node e in plane z from its U and its
// partner's C (or U, when the partner is erased too).
func (c *Clay) uncouple(cb, u [][]byte, isErased []bool, e, z, sc int) {
	q := c.q
	x, y := e%q, e/q
	zy := c.digit(z, y)
	ue := u[e][z*sc : (z+1)*sc]
	dst := cb[e][z*sc : (z+1)*sc]
	if x == zy { // done in place by decode
		return
	}
	a, zp := y*q+zy, c.swap(z, y, x)
	hi := x > zy
	if isErased[a] {
		ua := u[a][zp*sc : (zp+1)*sc]
		if hi { // C_hi = U_hi + C_lo = 3*U_hi + 2*U_lo
			mulSet(3, ue, dst)
		} else { // C_lo = 2*(U_hi + U_lo)
			mulSet(pftD, ue, dst)
		}
		mulXor(pftD, ua, dst)
		return
	}
	ca := cb[a][zp*sc : (zp+1)*sc]
	subtle.XORBytes(dst, ue, ca)
	if !hi { // C_lo = (U_lo + C_hi) / pftC
		mulSet(pftInv, dst, dst)
	}
}

// layout builds the internal C buffers for shards (len L each or nil);
// missing shards get buffers from alloc.
func (c *Clay) layout(shards [][]byte, L int, alloc func(i int) []byte) (cb [][]byte, erased []int) {
	cb = make([][]byte, c.n+c.nu)
	if c.nu > 0 {
		zero := c.zeros(L)
		for a := c.k; a < c.k+c.nu; a++ {
			cb[a] = zero
		}
	}
	for i, s := range shards {
		a := c.internal(i)
		if s == nil {
			s = alloc(i)
			erased = append(erased, a)
		}
		cb[a] = s
	}
	return cb, erased
}

// Encode computes the parity shards from the k data shards; every parity shard must be allocated with the data shards' length.
func (c *Clay) Encode(shards [][]byte) error {
	if len(shards) != c.n {
		return fmt.Errorf("%w: got %d, want %d", ErrShardCount, len(shards), c.n)
	}
	for i := c.k; i < c.n; i++ {
		if shards[i] == nil {
			return fmt.Errorf("%w: parity shard %d is not allocated", ErrShardSize, i)
		}
	}
	size, err := checkShards(c, shards)
	if err != nil {
		return err
	}
	cb, _ := c.layout(shards, size, nil)
	return c.encode(cb, size/c.alpha)
}

// Reconstruct fills every nil shard from the others; at least k must be present.
func (c *Clay) Reconstruct(shards [][]byte) error { return c.ReconstructSome(shards, nil) }

// ReconstructSome fills the nil shards whose required entry is true (all of
// them when required is nil). The layered decoder rebuilds every missing
// shard anyway; the others go to scratch space and are dropped.
func (c *Clay) ReconstructSome(shards [][]byte, required []bool) error {
	size, err := checkShards(c, shards)
	if err != nil {
		return err
	}
	present := 0
	for _, s := range shards {
		if s != nil {
			present++
		}
	}
	if present < c.k {
		return fmt.Errorf("%w: %d of %d shards present, need %d", ErrTooFewShards, present, c.n, c.k)
	}
	if present == c.n {
		return nil
	}
	if size == 0 {
		return fmt.Errorf("%w: present shards are empty", ErrShardSize)
	}
	if required != nil && len(required) != c.n {
		return fmt.Errorf("%w: required has %d entries, want %d", ErrShardCount, len(required), c.n)
	}
	cb, erased := c.layout(shards, size, func(i int) []byte {
		if required == nil || required[i] {
			shards[i] = make([]byte, size)
			return shards[i]
		}
		return make([]byte, size)
	})
	return c.decode(cb, erased, size/c.alpha)
}
