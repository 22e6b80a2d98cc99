package codec

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/klauspost/reedsolomon"
)

// linmap applies a fixed GF(2^8) matrix to byte slices position-wise:
// out[i] = sum_j m[i][j] * in[j]. It is the one bulk kernel behind inner
// decodes, PM encoding and every repair matrix.
//
// Two strategies, chosen once per matrix:
//   - sparse: per output row, the sum over its nonzero entries, processed
//     in cache-sized segments. Repair matrices are mostly sparse (a Clay
//     single repair has about n nonzeros per output row). On CPUs with
//     AVX-512 GFNI our own kernel (gfniSparse) keeps each row's sum in
//     registers and stores it once; elsewhere it is one library mul-XOR
//     per nonzero, a read-modify-write of the row each time.
//   - fused: kernels that read each input once for many outputs, used for
//     dense matrices: our coupled GFNI kernel (all inputs plain) on CPUs
//     with AVX-512 GFNI, up to gfniMaxRows rows per pass over any number
//     of columns; elsewhere reedsolomon encoders with the matrix as
//     custom parity rows.
type linmap struct {
	rows, cols int
	terms      [][]term // sparse form, per output row
	blocks     []fusedBlock
	dense      []denseBlock // the fused form on our GFNI kernel, where it runs
	groups     []rowGroup   // sparse form only: dense row groups
	rest       []int        // rows outside groups (all rows when fused)
	seg        int          // bytes per pass of the sparse kernel
}

type term struct {
	col  int
	c    byte
	bits uint64 // c as a gfniMatrix, for the sparse GFNI kernel
}

// fusedBlock is the sub-matrix rows [r0, r1) x columns [c0, c1) as an
// encoder. The library runs its GFNI kernels only up to fusedMax inputs and
// outputs and falls back to PSHUFB kernels beyond, about 4x slower per
// multiply-add. So a larger matrix is cut into blocks of at most
// fusedMax x fusedMax: the first column block of a row block writes the
// outputs, the others write scratch that is XORed in.
type fusedBlock struct {
	r0, r1, c0, c1 int
	enc            reedsolomon.Encoder
}

const fusedMax = 10

// denseBlock is rows [r0, r1) of a dense matrix, all columns, for our
// coupled GFNI kernel with every input plain (kind 0): up to gfniMaxRows
// outputs summed in registers in one pass over the inputs, whatever the
// column count, and no per-call setup.
type denseBlock struct {
	r0, r1 int
	b      *gfniBatch
	kinds  []byte // all zero, shared by the linmap's blocks
}

// segmentBudget is the cache the sparse kernel aims to stay within: a pass
// over a segment touches that segment of every input, so segments shrink as
// the matrix widens (a CORE relay reads ~400 inputs).
const segmentBudget = 512 << 10

func segmentFor(cols int) int {
	s := segmentBudget / max(cols, 1)
	return min(max(s&^63, 2048), 16<<10)
}

func newLinmap(m [][]byte, cols int) (*linmap, error) {
	l := &linmap{rows: len(m), cols: cols, terms: make([][]term, len(m)), seg: segmentFor(cols)}
	nnz := 0
	for i, row := range m {
		if len(row) != cols {
			return nil, fmt.Errorf("codec: linmap row %d has %d columns, want %d", i, len(row), cols)
		}
		for j, c := range row {
			if c != 0 {
				l.terms[i] = append(l.terms[i], term{j, c, gfniMatrices()[c]})
				nnz++
			}
		}
	}
	var err error
	if l.cols > 1 && denseEnough(nnz, l.rows, l.cols) {
		err = l.fuse(m)
	} else {
		err = l.group()
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// denseEnough is when a matrix takes the fused form: more than half of
// its rows*cols entries nonzero.
func denseEnough(nnz, rows, cols int) bool { return 2*nnz > rows*cols }

// fuse builds the fused form of m: on CPUs with AVX-512 GFNI, blocks of
// up to gfniMaxRows rows for our kernel; elsewhere library encoders on
// blocks of near-equal size (a 19-column matrix becomes 10+9, not 10+9
// padded).
func (l *linmap) fuse(m [][]byte) error {
	l.rest = seq(l.rows)
	if hasGFNI {
		plain := make([]byte, l.cols) // every block's kinds: all inputs plain
		for _, rb := range splitEven(l.rows, gfniMaxRows) {
			b, err := newGFNIBatch(m[rb[0]:rb[1]])
			if err != nil {
				return fmt.Errorf("codec: dense linmap: %w", err)
			}
			l.dense = append(l.dense, denseBlock{rb[0], rb[1], b, plain})
		}
		return nil
	}
	for _, rb := range splitEven(l.rows, fusedMax) {
		for _, cb := range splitEven(l.cols, fusedMax) {
			sub := make([][]byte, rb[1]-rb[0])
			for i := range sub {
				sub[i] = m[rb[0]+i][cb[0]:cb[1]]
			}
			enc, err := reedsolomon.New(cb[1]-cb[0], len(sub), reedsolomon.WithCustomMatrix(sub), reedsolomon.WithMaxGoroutines(1))
			if err != nil {
				return fmt.Errorf("codec: fused linmap: %w", err)
			}
			l.blocks = append(l.blocks, fusedBlock{rb[0], rb[1], cb[0], cb[1], enc})
		}
	}
	return nil
}

// splitEven cuts [0, n) into ceil(n/most) ranges of near-equal length.
func splitEven(n, most int) [][2]int {
	parts := (n + most - 1) / most
	out := make([][2]int, parts)
	for i := range out {
		out[i] = [2]int{i * n / parts, (i + 1) * n / parts}
	}
	return out
}

// shardLists and accScratch recycle the slice headers handed to the
// encoders and the scratch of accumulating blocks, so a fused apply makes
// no garbage of its own (the library still allocates per call).
var (
	shardLists = sync.Pool{New: func() any { s := make([][]byte, 0, 2*fusedMax); return &s }}
	accScratch sync.Pool
)

// apply overwrites out[i] (each at least len(in[0]) bytes) with row i of
// m times in. All in slices must have equal length.
func (l *linmap) apply(in, out [][]byte) {
	if len(in) != l.cols || len(out) != l.rows {
		panic(fmt.Sprintf("codec: linmap %dx%d applied to %d inputs, %d outputs", l.rows, l.cols, len(in), len(out)))
	}
	size := 0
	if len(in) > 0 {
		size = len(in[0])
	}
	switch {
	case size == 0:
	case l.dense != nil:
		l.applyDense(in, out, size)
	case l.blocks != nil && l.fusedPays(size):
		l.applyFused(in, out, size)
	case l.blocks != nil:
		l.sparseRows(l.rest, in, out, size)
	default:
		l.applyGroups(in, out, size)
	}
}

// sparseRows computes the given rows with one mul-XOR per nonzero, in
// segments that keep the inputs of a pass in cache.
func (l *linmap) sparseRows(rows []int, in, out [][]byte, size int) {
	if hasGFNI {
		l.sparseGFNI(rows, in, out, size)
		return
	}
	for off := 0; off < size; off += l.seg {
		end := min(off+l.seg, size)
		for _, i := range rows {
			ts := l.terms[i]
			o := out[i][off:end]
			if len(ts) == 0 {
				clear(o)
				continue
			}
			mulSet(ts[0].c, in[ts[0].col][off:end], o)
			for _, t := range ts[1:] {
				mulXor(t.c, in[t.col][off:end], o)
			}
		}
	}
}

// sparseTable is the kernel form of sparseRows' rows for one call.
type sparseTable struct {
	ptrs  []unsafe.Pointer
	mats  []uint64
	terms []int
}

var sparseTables = sync.Pool{New: func() any { return new(sparseTable) }}

// sparseGFNI is sparseRows on the GFNI sparse kernel: each row's sum
// builds in registers and is stored once, instead of one read-modify-write
// of the row per nonzero.
func (l *linmap) sparseGFNI(rows []int, in, out [][]byte, size int) {
	t := sparseTables.Get().(*sparseTable)
	ptrs, mats, terms := t.ptrs[:0], t.mats[:0], t.terms[:0]
	for _, i := range rows {
		if len(out[i]) < size {
			panic(fmt.Sprintf("codec: linmap output %d has %d bytes, want %d", i, len(out[i]), size))
		}
		ts := l.terms[i]
		terms = append(terms, len(ts))
		ptrs = append(ptrs, unsafe.Pointer(unsafe.SliceData(out[i])))
		for _, tm := range ts {
			if len(in[tm.col]) < size {
				panic(fmt.Sprintf("codec: linmap input %d has %d bytes, want %d", tm.col, len(in[tm.col]), size))
			}
			ptrs = append(ptrs, unsafe.Pointer(unsafe.SliceData(in[tm.col])))
			mats = append(mats, tm.bits)
		}
	}
	for off := 0; off < size; off += l.seg {
		sparseRun(off, min(off+l.seg, size), ptrs, mats, terms)
	}
	clear(ptrs) // the pool must not pin callers' buffers
	t.ptrs, t.mats, t.terms = ptrs[:0], mats[:0], terms[:0]
	sparseTables.Put(t)
}

// fusedCallBytes is the fixed cost of one fused block call (~170 ns: the
// library allocates and builds its kernel tables per call) in multiply-add
// bytes of the sparse kernel, which it runs at about half the fused rate
// (measured ~60 vs ~120 GB/s for one output row).
const fusedCallBytes = 20 << 10

// fusedPays reports whether the fused blocks beat the sparse kernel for
// slices of size bytes: they save about half the sparse work and pay
// fusedCallBytes per block. Only small slices of thin matrices (a Clay
// plane with one erasure at 1 KiB sub-chunks) stay sparse.
func (l *linmap) fusedPays(size int) bool {
	return size*l.nonzeros() >= len(l.blocks)*fusedCallBytes
}

func (l *linmap) applyFused(in, out [][]byte, size int) {
	sp := shardLists.Get().(*[][]byte)
	var tmp []byte
	var tp *[]byte
	for _, b := range l.blocks {
		shards := append((*sp)[:0], in[b.c0:b.c1]...)
		acc := b.c0 > 0
		if acc && tp == nil {
			tp = getBytes(&accScratch, fusedMax*size)
			tmp = *tp
		}
		for i := b.r0; i < b.r1; i++ {
			if acc {
				shards = append(shards, tmp[(i-b.r0)*size:(i-b.r0+1)*size])
			} else {
				shards = append(shards, out[i][:size])
			}
		}
		if err := b.enc.Encode(shards); err != nil {
			panic(fmt.Sprintf("codec: fused linmap: %v", err))
		}
		for i := b.r0; acc && i < b.r1; i++ {
			ll.GalMulSliceXor(1, tmp[(i-b.r0)*size:(i-b.r0+1)*size], out[i][:size])
		}
		clear(shards) // the pool must not pin callers' buffers
		*sp = shards[:0]
	}
	shardLists.Put(sp)
	if tp != nil {
		accScratch.Put(tp)
	}
}

// applyDense is apply for a dense matrix on the GFNI kernel: one call per
// block of rows and segment.
func (l *linmap) applyDense(in, out [][]byte, size int) {
	pp := encodePtrs.Get().(*[]unsafe.Pointer)
	ptrs := (*pp)[:0]
	for _, b := range l.dense {
		for j, s := range in {
			if len(s) < size {
				panic(fmt.Sprintf("codec: linmap input %d has %d bytes, want %d", j, len(s), size))
			}
			p := unsafe.Pointer(unsafe.SliceData(s))
			ptrs = append(ptrs, p, p)
		}
		for i := b.r0; i < b.r1; i++ {
			if len(out[i]) < size {
				panic(fmt.Sprintf("codec: linmap output %d has %d bytes, want %d", i, len(out[i]), size))
			}
			ptrs = append(ptrs, unsafe.Pointer(unsafe.SliceData(out[i])))
		}
	}
	// Segments keep a pass's inputs in cache for the next row block.
	for off := 0; off < size; off += l.seg {
		end, task := min(off+l.seg, size), ptrs
		for _, b := range l.dense {
			n := 2*l.cols + b.r1 - b.r0
			b.b.runCoupled(off, end, task[:n], b.kinds, 0, stepWide, nil)
			task = task[n:]
		}
	}
	clear(ptrs) // the pool must not pin callers' buffers
	*pp = ptrs[:0]
	encodePtrs.Put(pp)
}

// getBytes returns a pooled buffer of n bytes (contents undefined).
func getBytes(p *sync.Pool, n int) *[]byte {
	if b, ok := p.Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

// nonzeros counts the nonzero entries, the work of the sparse kernel.
func (l *linmap) nonzeros() int {
	n := 0
	for _, ts := range l.terms {
		n += len(ts)
	}
	return n
}
