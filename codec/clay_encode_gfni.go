package codec

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// With our own batched kernels a call costs a few ns, so encoding can take
// the path with the least arithmetic instead of the fewest calls. Per plane,
// one kernel task computes parity U = inner parity rows x data U, where each
// data input is formed in registers from its coupled pair as it is loaded:
// a dot's U is its C, a hi node's U_hi = C_hi + C_lo a plain XOR, a lo
// node's U_lo = C_hi + pftC*C_lo one multiply. Once the q planes of a run
// are done, parity C comes from parity U pair by pair in place:
// C_lo = pftD*(U_hi + U_lo), C_hi = U_hi + C_lo.
//
// Per output position that is k*m multiplies plus one per coupled lo data
// node and one per coupled parity pair, against (k + coupled)*m for the
// folded library path (clay-6-3: 21 per plane against 30; RS needs 18), and
// no U is ever written.
//
// Runs go in tiles whose parity fits in cache, so that the uncoupling reads
// the parity U while it is still there.

// clayProgram is the encode of one code as kernel tasks. Refs are resolved
// to pointers per stripe.
type clayProgram struct {
	parity             *gfniBatch
	planes             []sref // per plane: [A, B] per data node, then m parity C
	kinds              []byte // per plane: the kind of each data node's input
	pairs              []sref // per run: [hi, lo, hi, lo] per coupled parity pair
	pftCBits, pftDBits uint64
}

// sref names sub-chunk z of internal node a; zero refs name zeros (the C
// of a virtual node).
type sref struct {
	zero bool
	a, z int32
}

// encodeTile is the parity bytes a tile of runs aims for.
const encodeTile = 256 << 10

var encodePtrs = sync.Pool{New: func() any { return new([]unsafe.Pointer) }}

func (c *Clay) program() (*clayProgram, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prog != nil {
		return c.prog, nil
	}
	kk, q := c.k+c.nu, c.q
	p := &clayProgram{pftCBits: gfniMatrix(pftC), pftDBits: gfniMatrix(pftD)}
	var err error
	if p.parity, err = newGFNIBatch(c.inner[kk:]); err != nil {
		return nil, fmt.Errorf("codec: %s parity batch: %w", c.Name(), err)
	}
	ref := func(a, z int) sref {
		if c.isVirtual(a) {
			return sref{zero: true}
		}
		return sref{false, int32(a), int32(z)}
	}
	for z := 0; z < c.alpha; z++ {
		for a := 0; a < kk; a++ {
			x, y := a%q, a/q
			zy := c.digit(z, y)
			self, partner := ref(a, z), ref(y*q+zy, c.swap(z, y, x))
			switch {
			case x == zy: // dot: U = C
				p.planes = append(p.planes, self, self)
				p.kinds = append(p.kinds, 0)
			case x > zy: // hi: U_hi = C_hi + C_lo
				p.planes = append(p.planes, self, partner)
				p.kinds = append(p.kinds, 1)
			default: // lo: U_lo = C_hi + pftC*C_lo
				p.planes = append(p.planes, partner, self)
				p.kinds = append(p.kinds, 2)
			}
		}
		for x := 0; x < c.m; x++ {
			p.planes = append(p.planes, ref(kk+x, z))
		}
	}
	for z0 := 0; z0 < c.alpha; z0 += q {
		for xh := 1; xh < q; xh++ {
			for xl := 0; xl < xh; xl++ {
				hi, lo := ref(kk+xh, z0+xl), ref(kk+xl, z0+xh)
				p.pairs = append(p.pairs, hi, lo, hi, lo)
			}
		}
	}
	c.prog = p
	return p, nil
}

// encodeGFNI is encode on the batched kernels; cb as for decode.
func (c *Clay) encodeGFNI(cb [][]byte, sc int) error {
	p, err := c.program()
	if err != nil {
		return err
	}
	kk, q := c.k+c.nu, c.q
	// Every stored C buffer holds alpha*sc bytes (checked by Encode and
	// decode), so a ref's pointer is its node's base plus z*sc.
	at := func(r sref) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(unsafe.SliceData(cb[r.a])), int(r.z)*sc) }
	zero := unsafe.Pointer(&c.zeros(sc)[0])
	pp := encodePtrs.Get().(*[]unsafe.Pointer)
	defer encodePtrs.Put(pp)
	ptrs := slices.Grow((*pp)[:0], len(p.planes)+len(p.pairs))
	for _, r := range p.planes {
		if r.zero {
			ptrs = append(ptrs, zero)
		} else {
			ptrs = append(ptrs, at(r))
		}
	}
	planes := len(ptrs)
	for _, r := range p.pairs {
		ptrs = append(ptrs, at(r))
	}
	perPlane, perRun := 2*kk+c.m, 2*q*(q-1)
	tile := max(1, encodeTile/(q*c.m*sc)) // runs
	for r0 := 0; r0 < c.alpha/q; r0 += tile {
		r1 := min(r0+tile, c.alpha/q)
		p.parity.runCoupled(sc, ptrs[r0*q*perPlane:r1*q*perPlane], p.kinds[r0*q*kk:r1*q*kk], p.pftCBits)
		pairCRun(p.pftDBits, sc, ptrs[planes+r0*perRun:planes+r1*perRun])
	}
	clear(ptrs) // the pool must not pin the stripe
	*pp = ptrs[:0]
	return nil
}
