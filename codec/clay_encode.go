package codec

import "fmt"

// Encoding is the layered decode with every parity node erased, but that
// case has structure the general decoder cannot use: parity is exactly the
// last y-section (k+nu = (t-1)q), so no coupled pair mixes data and parity,
// and the parity digit z_{t-1} is the least significant one.
//
// A run is the q consecutive planes that share every digit but the last.
// Inside a run the role (dot, hi, lo) of every data node is constant, and a
// data partner sits at a fixed offset (x - z_y)*pw[y] planes with
// pw[y] >= q, so the partners of a run are a run too. The pairwise
// transforms of the data nodes and the inner code's parity rows therefore
// fold into one matrix per run, applied position-wise over q*sc bytes by
// one fused kernel call that reads data C straight from the shards: no U
// of data is ever written. The call writes the parity U of the run in
// place; the parity dots are then final, and the coupled parity pairs of
// the run, all inside it, are uncoupled in place while they are in cache.
//
// Against a per-plane loop this cuts the fused calls (each has a fixed
// cost of ~150 ns in the library) by q and drops the U scratch traffic;
// the price is one more column per coupled data node in the fold.

// runEncoder is the folded matrix of one run.
type runEncoder struct {
	in []cref // first stored sub-chunk of each input run, in column order
	lm *linmap
}

// runEncoders returns the folded matrices of the alpha/q runs (cached).
func (c *Clay) runEncoders() ([]runEncoder, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs != nil {
		return c.runs, nil
	}
	kk := c.k + c.nu
	data := seq(kk)
	runs := make([]runEncoder, c.alpha/c.q)
	for r := range runs {
		// planeDecoder folds the transforms of the data nodes at the run's
		// first plane into the parity rows; the run's other planes have
		// the same roles and shifted partners.
		pd, err := c.planeDecoder(c.inner[kk:], data, r*c.q)
		if err != nil {
			return nil, fmt.Errorf("codec: %s run encoder %d: %w", c.Name(), r, err)
		}
		runs[r] = runEncoder(pd) // pd.in are the runs' first sub-chunks
	}
	c.runs = runs
	return runs, nil
}

// encode computes C of the parity nodes; cb as for decode.
func (c *Clay) encode(cb [][]byte, sc int) error {
	if sc == 0 {
		return nil
	}
	if hasGFNI && c.m <= gfniMaxRows {
		return c.encodeGFNI(cb, sc, c.n*c.alpha*sc > streamBytes())
	}
	return c.encodeFused(cb, sc)
}

// encodeFused is encode on the library's kernels.
func (c *Clay) encodeFused(cb [][]byte, sc int) error {
	runs, err := c.runEncoders()
	if err != nil {
		return err
	}
	kk, span := c.k+c.nu, c.q*sc
	var in [][]byte
	out := make([][]byte, c.m)
	for r, re := range runs {
		in = in[:0]
		for _, s := range re.in {
			in = append(in, cb[s.a][s.z*sc:s.z*sc+span])
		}
		off := r * span
		for x := range out {
			out[x] = cb[kk+x][off : off+span]
		}
		re.lm.apply(in, out)
		uncoupleRun(out, sc)
	}
	return nil
}

// uncoupleRun turns the parity U of one run into C in place. run[x] holds
// the q sub-chunks of parity node x; node x at plane j (x != j) is coupled
// with node j at plane x, the larger x being hi. Per pair,
// C_lo = pftD*(U_hi + U_lo) and C_hi = U_hi + C_lo: three single-slice
// kernels, whose per-call cost is a few ns where the fused 2x2 kernel pays
// ~150 ns, and sub-chunks are small here.
func uncoupleRun(run [][]byte, sc int) {
	for xh := 1; xh < len(run); xh++ {
		for xl := 0; xl < xh; xl++ {
			hi := run[xh][xl*sc : (xl+1)*sc]
			lo := run[xl][xh*sc : (xh+1)*sc]
			ll.GalMulSliceXor(1, hi, lo)
			ll.GalMulSlice(pftD, lo, lo)
			ll.GalMulSliceXor(1, lo, hi)
		}
	}
}
