package codec

import (
	"crypto/subtle"
	"fmt"
)

// innerDecoder recovers the U-domain sub-chunks of the erased internal
// nodes of one plane from k+nu known ones. Every plane of a layered decode
// has the same erasure set, so one matrix serves all planes.
type innerDecoder struct {
	in []int // internal indices read, k+nu of them
	lm *linmap
}

func (c *Clay) innerDecoder(erased []int) (*innerDecoder, error) {
	key := setKey(erased)
	c.mu.Lock()
	d, ok := c.decoders[key]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
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
		return nil, fmt.Errorf("codec: %s inner decode %v: %w", c.Name(), erased, err)
	}
	rows := make([][]byte, len(erased))
	for i, a := range erased {
		rows[i] = matMul([][]byte{c.inner[a]}, inv)[0]
	}
	lm, err := newLinmap(rows, kk)
	if err != nil {
		return nil, err
	}
	d = &innerDecoder{in: in, lm: lm}
	c.mu.Lock()
	c.decoders[key] = d
	c.mu.Unlock()
	return d, nil
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
// their intersection score so that every coupled partner needed is known.
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
	tbuf := c.getScratch(len(dec.in) * sc)
	defer c.scratch.Put(tbuf)
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
	sub := func(b []byte, z int) []byte { return b[z*sc : (z+1)*sc] }
	in := make([][]byte, len(dec.in))
	out := make([][]byte, len(erased))
	for _, planes := range buckets {
		for _, z := range planes {
			for j, a := range dec.in {
				x, y := a%q, a/q
				zy := c.digit(z, y)
				ca := sub(cb[a], z)
				if x == zy { // dot: U = C
					in[j] = ca
					continue
				}
				cp := sub(cb[y*q+zy], c.swap(z, y, x)) // known, or decoded in an earlier round
				dst := (*tbuf)[j*sc : (j+1)*sc]
				if x > zy { // a is hi: U_hi = C_hi + C_lo
					subtle.XORBytes(dst, ca, cp)
				} else { // a is lo: U_lo = C_hi + pftC*C_lo
					copy(dst, cp)
					mulXor(pftC, ca, dst)
				}
				in[j] = dst
			}
			for i, e := range erased {
				out[i] = sub(u[e], z)
			}
			dec.lm.apply(in, out)
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
	if x == zy {
		copy(dst, ue)
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
		zero := make([]byte, L)
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
	var parity []int
	for i := c.k; i < c.n; i++ {
		parity = append(parity, c.internal(i))
	}
	return c.decode(cb, parity, size/c.alpha)
}

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
