package codec

import "fmt"

// pairKernels are the pairwise transform and its inverse as fused 2x2
// kernels: one pass over both members of a pair instead of two or three.
type pairKernels struct {
	forward *linmap // (C_hi, C_lo) -> (U_hi, U_lo)
	inverse *linmap // (U_hi, U_lo) -> (C_hi, C_lo)
}

func newPairKernels() (pairKernels, error) {
	f, err := newLinmap([][]byte{{1, 1}, {1, pftC}}, 2)
	if err != nil {
		return pairKernels{}, err
	}
	// C_lo = pftD*(U_hi + U_lo), C_hi = U_hi + C_lo.
	i, err := newLinmap([][]byte{{1 ^ pftD, pftD}, {pftD, pftD}}, 2)
	return pairKernels{forward: f, inverse: i}, err
}

// Encoding is the layered decode with every parity node erased, but that
// case has structure the general decoder cannot use: parity is exactly the
// last y-section (k+nu = (t-1)q), so no coupled pair mixes data and parity.
// encode therefore (1) transforms each data pair to the U domain once,
// (2) runs the inner code's k+nu -> m encode per plane on U, and
// (3) uncouples the parity pairs. The general decoder instead reads both
// members of every pair in each plane, about twice the multiply-adds for
// large q.

// innerEncoder returns the m x (k+nu) parity rows of the inner code as a
// fused kernel (cached like the decoders).
func (c *Clay) innerEncoder() (*linmap, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.encoder != nil {
		return c.encoder, nil
	}
	lm, err := newLinmap(c.inner[c.k+c.nu:], c.k+c.nu)
	if err != nil {
		return nil, fmt.Errorf("codec: %s inner encoder: %w", c.Name(), err)
	}
	c.encoder = lm
	return lm, nil
}

// encode computes C of the parity nodes; cb as for decode.
func (c *Clay) encode(cb [][]byte, sc int) error {
	if sc == 0 {
		return nil
	}
	enc, err := c.innerEncoder()
	if err != nil {
		return err
	}
	// All arithmetic is position-wise inside sub-chunks, so encodeRange
	// could run on byte ranges to stay in cache; measured, the extra kernel
	// calls cost more than the cache misses, so it runs once per stripe.
	ubuf := c.getScratch((c.k + c.nu + c.m) * c.alpha * sc)
	defer c.scratch.Put(ubuf)
	c.encodeRange(enc, cb, *ubuf, sc, 0, sc, sc)
	return nil
}

// encodeRange encodes bytes [off, off+ln) of every sub-chunk; u is scratch
// with stride seg per sub-chunk.
func (c *Clay) encodeRange(enc *linmap, cb [][]byte, ubuf []byte, sc, off, ln, seg int) {
	q, kk, L := c.q, c.k+c.nu, c.alpha*seg
	sub := func(b []byte, z int) []byte { return b[z*sc+off : z*sc+off+ln] }
	usub := func(b []byte, z int) []byte { return b[z*seg : z*seg+ln] }
	u := make([][]byte, c.n+c.nu)
	for a := range u {
		u[a] = ubuf[a*L : (a+1)*L]
	}
	// (1) U of data and virtual nodes, pair by pair (each pair once, from
	// its hi member). Virtual nodes have C = 0.
	for a := 0; a < kk; a++ {
		x, y := a%q, a/q
		for z := 0; z < c.alpha; z++ {
			zy := c.digit(z, y)
			if x < zy {
				continue // lo member: done with its hi partner
			}
			if x == zy {
				continue // dot: U = C, read in place below
			}
			b, zp := y*q+zy, c.swap(z, y, x)
			c.prt(sub(cb[a], z), sub(cb[b], zp), usub(u[a], z), usub(u[b], zp), c.isVirtual(a), c.isVirtual(b))
		}
	}
	// (2) inner encode per plane; parity dots are final, write them in place.
	in := make([][]byte, kk)
	out := make([][]byte, c.m)
	for z := 0; z < c.alpha; z++ {
		for a := 0; a < kk; a++ {
			if a%q == c.digit(z, a/q) {
				in[a] = sub(cb[a], z) // virtual dots read the zero buffer
			} else {
				in[a] = usub(u[a], z)
			}
		}
		for i := 0; i < c.m; i++ {
			a := kk + i
			if a%q == c.digit(z, a/q) {
				out[i] = sub(cb[a], z)
			} else {
				out[i] = usub(u[a], z)
			}
		}
		enc.apply(in, out)
	}
	// (3) uncouple parity pairs: both members are parity, both U known;
	// one fused 2x2 pass per pair, from its hi member.
	for a := kk; a < c.n+c.nu; a++ {
		x, y := a%q, a/q
		for z := 0; z < c.alpha; z++ {
			zy := c.digit(z, y)
			if x <= zy {
				continue
			}
			b, zp := y*q+zy, c.swap(z, y, x)
			c.pairs.inverse.apply([][]byte{usub(u[a], z), usub(u[b], zp)}, [][]byte{sub(cb[a], z), sub(cb[b], zp)})
		}
	}
}

// prt is the pairwise transform of a coupled pair (hi, lo):
// U_hi = C_hi + C_lo, U_lo = C_hi + pftC*C_lo, skipping virtual (zero) C.
func (c *Clay) prt(cHi, cLo, uHi, uLo []byte, hiVirtual, loVirtual bool) {
	switch {
	case hiVirtual && loVirtual:
		clear(uHi)
		clear(uLo)
	case hiVirtual:
		copy(uHi, cLo)
		mulSet(pftC, cLo, uLo)
	case loVirtual:
		copy(uHi, cHi)
		copy(uLo, cHi)
	default:
		c.pairs.forward.apply([][]byte{cHi, cLo}, [][]byte{uHi, uLo})
	}
}
