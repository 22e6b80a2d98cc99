package codec

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/klauspost/cpuid/v2"
)

// With our own batched kernels a call costs a few ns, so encoding can take
// the path with the least arithmetic instead of the fewest calls. Per plane,
// one kernel task computes parity U = inner parity rows x data U, where each
// data input is formed in registers from its coupled pair as it is loaded:
// a dot's U is its C, a hi node's U_hi = C_hi + C_lo a plain XOR, a lo
// node's U_lo = C_hi + pftC*C_lo one multiply.
//
// Parity C comes from parity U pair by pair, C_lo = pftD*(U_hi + U_lo),
// C_hi = U_hi + C_lo, and the kernel does that as it stores (pairFix): the
// planes of a run go in order, so when plane j stores parity node x < j,
// its U_lo, the pair's U_hi (node j in plane x) was stored as U one or more
// planes before. The kernel loads it, stores C_lo as the output and
// rewrites C_hi over U_hi. A lo half is written once, as C, and a hi half
// is read back once. A separate pair pass over the run's parity, which this
// replaced, wrote every coupled U and read all of it back; measured on an
// Intel Xeon (2 MB L2), clay-10-10 at 16 KiB sub-chunks went from 6.3 to
// 8.4 GB/s, and no cell lost beyond the noise.
//
// Per output position that is k*m multiplies plus one per coupled lo data
// node and one per coupled parity pair, against (k + coupled)*m for the
// folded library path (clay-6-3: 21 per plane against 30; RS needs 18), and
// no data U is ever written. Runs go in tiles whose parity fits in cache,
// so that a pair's U_hi is still there when its lo half is stored.
//
// A run's q planes share one task: every role is constant inside a run
// and every stream of it (a node's own sub-chunks, its partner's, the
// parity's) is q consecutive sub-chunks, so plane j is bytes [j*sc,
// (j+1)*sc) of the same task. Against a task per plane that resolves q
// times fewer pointers per stripe (a sixth of the time of clay-8-4 at
// 1 KiB sub-chunks went there). The kernel walks a task's planes itself
// (pairFix.planes), so each stream is read front to back in one go: with
// a kernel call per plane instead, each of a task's ~28 streams broke off
// after one sub-chunk, and clay-10-4 at 1 KiB encoded ~10% slower.
//
// A kernel that did a run's q planes side by side, keeping their q*q
// parity U in registers and uncoupling it there (parity written once), was
// ~10% faster for q = 3 on an Intel Xeon with a 48 KiB 12-way L1, but up
// to 2x slower on AMD Zen 4 (32 KiB 8-way L1) at sub-chunks of a multiple
// of 4 KiB: its ~45 streams sit at one offset mod 4 KiB, so they fight
// over one L1 set. It was removed; a task walks its planes one after the
// other, and that is never far from the best.

// clayProgram is the encode of one code as kernel tasks, a task per run
// (its first plane's refs), and per plane the pairFix refs that uncouple
// the run's parity as it is stored. Refs are resolved to pointers per
// stripe.
type clayProgram struct {
	parity             *gfniBatch
	tasks              []sref // per run: [A, B] per data node, then its parity C
	kinds              []byte // per run: the kind of each data node's input
	fixes              []sref // per run, then per plane j of it: m pairFix refs
	pftCBits, pftDBits uint64
}

// sref names sub-chunk z of internal node a. A virtual node's C is zeros:
// its refs name node kk+m (one past the last), whose base is a run of
// shared zero sub-chunks, at z = 0, so that resolving a ref never branches.
type sref struct{ a, z int32 }

// encodeTile is the parity bytes a tile of runs aims for, so that a pair's
// U_hi is still in cache when its lo half's plane reads it back.
const encodeTile = 256 << 10

// streamTile is the parity bytes a window of a run aims for on the
// streamed path. Measured on AMD Zen 4 against 64 KiB, 256 KiB and
// 512 KiB: 128 KiB was best by a few percent (clay-8-4 at 64 KiB and
// clay-10-10 at 16 KiB sub-chunks), and 512 KiB lost 10-15%.
const streamTile = 128 << 10

// streamBytes is the stripe size past which encode takes the kernel's
// narrow steps: half the last-level cache (32 MiB if the CPU does not say),
// beyond which the stripe, read twice (data C as itself and as a partner),
// streams from DRAM. Measured on AMD Zen 4 (32 MiB L3), narrow steps
// encoded stripes of 20-56 MB 30-50% faster and those of 2-14 MB 10-25%
// slower than wide ones, and still 5-15% slower with the prefetch that
// narrow steps now take. Byte windows on a run's parity gain ~20% on
// streamed clay-10-10 (a run's parity is 1.6 MB at 16 KiB sub-chunks) and
// lose a little in cache, so only the streamed path takes them.
var streamBytes = sync.OnceValue(func() int {
	l3 := cpuid.CPU.Cache.L3
	if l3 <= 0 {
		l3 = 32 << 20
	}
	return l3 / 2
})

var encodePtrs = sync.Pool{New: func() any { return new([]unsafe.Pointer) }}

func (c *Clay) program() (*clayProgram, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prog != nil {
		return c.prog, nil
	}
	kk, q := c.k+c.nu, c.q
	p := &clayProgram{
		pftCBits: gfniMatrix(pftC),
		pftDBits: gfniMatrix(pftD),
	}
	var err error
	if p.parity, err = newGFNIBatch(c.inner[kk:]); err != nil {
		return nil, fmt.Errorf("codec: %s parity batch: %w", c.Name(), err)
	}
	ref := func(a, z int) sref {
		if c.isVirtual(a) {
			return sref{int32(kk + c.m), 0}
		}
		return sref{int32(a), int32(z)}
	}
	inputs := func(z int) {
		for a := 0; a < kk; a++ {
			x, y := a%q, a/q
			zy := c.digit(z, y)
			self, partner := ref(a, z), ref(y*q+zy, c.swap(z, y, x))
			switch {
			case x == zy: // dot: U = C
				p.tasks = append(p.tasks, self, self)
				p.kinds = append(p.kinds, 0)
			case x > zy: // hi: U_hi = C_hi + C_lo
				p.tasks = append(p.tasks, self, partner)
				p.kinds = append(p.kinds, 1)
			default: // lo: U_lo = C_hi + pftC*C_lo
				p.tasks = append(p.tasks, partner, self)
				p.kinds = append(p.kinds, 2)
			}
		}
	}
	outputs := func(z int) {
		for x := 0; x < c.m; x++ {
			p.tasks = append(p.tasks, ref(kk+x, z))
		}
	}
	for z0 := 0; z0 < c.alpha; z0 += q {
		inputs(z0)
		outputs(z0)
		// In plane z0+j, parity node x < j is the lo half of the pair
		// whose hi half is parity node j in plane z0+x, stored as U when
		// that plane ran; x >= j is a hi half or a dot, stored as computed.
		for j := 0; j < q; j++ {
			for x := 0; x < c.m; x++ {
				fix := sref{-1, 0}
				if x < j {
					fix = ref(kk+j, z0+x)
				}
				p.fixes = append(p.fixes, fix)
			}
		}
	}
	c.prog = p
	return p, nil
}

// encodeGFNI is encode on the batched kernels; cb as for decode. streamed
// says the stripe does not stay in cache between its two reads (see
// streamBytes): the kernel then takes single-block steps, prefetching each
// input a few lines ahead, and a run's sub-chunks go in byte windows so
// that a pair's U_hi is still in L2 when its lo half reads it back.
func (c *Clay) encodeGFNI(cb [][]byte, sc int, streamed bool) error {
	p, err := c.program()
	if err != nil {
		return err
	}
	// Every stored C buffer holds alpha*sc bytes (checked by Encode and
	// decode), so a ref's pointer is its node's base plus z*sc.
	var bases [257]unsafe.Pointer // kk+m <= 256 internal nodes, then zeros
	for a, b := range cb {
		bases[a] = unsafe.Pointer(unsafe.SliceData(b))
	}
	bases[len(cb)] = unsafe.Pointer(&c.zeros(c.q * sc)[0])
	pp := encodePtrs.Get().(*[]unsafe.Pointer)
	n := len(p.tasks) + len(p.fixes)
	ptrs := slices.Grow((*pp)[:0], n)[:n]
	defer func() {
		clear(ptrs) // the pool must not pin the stripe
		*pp = ptrs[:0]
		encodePtrs.Put(pp)
	}()
	for i, r := range p.tasks {
		ptrs[i] = unsafe.Add(bases[r.a], int(r.z)*sc)
	}
	fixes := ptrs[len(p.tasks):]
	for i, r := range p.fixes {
		fixes[i] = nil
		if r.a >= 0 {
			fixes[i] = unsafe.Add(bases[r.a], int(r.z)*sc)
		}
	}
	runs := c.alpha / c.q
	perRun, kindsPerRun := len(p.tasks)/runs, len(p.kinds)/runs
	runParity := c.q * c.m * sc // parity bytes of one run
	blocks, win := stepWide, sc
	if streamed {
		blocks = stepNarrow
		if runParity > streamTile {
			win = max(64, streamTile/(c.q*c.m)&^63)
		}
	}
	tile := max(1, encodeTile/runParity) // runs per kernel call
	for r0 := 0; r0 < runs; r0 += tile {
		r1 := min(r0+tile, runs)
		tasks, kinds := ptrs[r0*perRun:r1*perRun], p.kinds[r0*kindsPerRun:r1*kindsPerRun]
		// Each task walks its run's planes in order (see fixes).
		fix := &pairFix{ptrs: fixes[r0*c.q*c.m : r1*c.q*c.m], planes: c.q, stride: sc, d: p.pftDBits}
		for w0 := 0; w0 < sc; w0 += win {
			p.parity.runCoupled(w0, min(w0+win, sc), tasks, kinds, p.pftCBits, blocks, fix)
		}
	}
	return nil
}
