package codec

import (
	"fmt"
	"sync"
	"unsafe"
)

// The reedsolomon library's custom-matrix encoders pay ~150 ns per call
// before any work (they rebuild their GFNI tables and allocate each time).
// That is nothing at 64 KiB, but a Clay stripe of 1 KiB sub-chunks is a
// few hundred small matrix products, and the fixed cost would exceed the
// work. gfniBatch is our own kernel for that shape: one matrix, converted
// to GFNI bit matrices once, applied to many tasks (each its own input and
// output slices) in a single assembly call.

// gfniBatch is a rows x cols GF(2^8) matrix ready for the kernels.
type gfniBatch struct {
	rows, cols int
	bits       []uint64 // column-major: bits[j*rows+i] multiplies input j into output i
}

func newGFNIBatch(m [][]byte) (*gfniBatch, error) {
	if len(m) == 0 || len(m) > gfniMaxRows {
		return nil, fmt.Errorf("codec: gfni batch of %d rows (at most %d)", len(m), gfniMaxRows)
	}
	b := &gfniBatch{rows: len(m), cols: len(m[0]), bits: make([]uint64, len(m)*len(m[0]))}
	for i, row := range m {
		if len(row) != b.cols {
			return nil, fmt.Errorf("codec: gfni batch row %d has %d columns, want %d", i, len(row), b.cols)
		}
		for j, c := range row {
			b.bits[j*b.rows+i] = gfniMatrix(c)
		}
	}
	return b, nil
}

// gfniMatrices is gfniMatrix of every byte, built on first use.
var gfniMatrices = sync.OnceValue(func() *[256]uint64 {
	var t [256]uint64
	for c := range t {
		t[c] = gfniMatrix(byte(c))
	}
	return &t
})

// gfniMatrix is multiplication by c as the 8x8 bit matrix of
// VGF2P8AFFINEQB: byte 7-i of the result selects the input bits whose
// products with c have bit i set.
func gfniMatrix(c byte) uint64 {
	var m uint64
	for i := 0; i < 8; i++ {
		var row byte
		for j := 0; j < 8; j++ {
			if gfMul(c, 1<<j)>>i&1 != 0 {
				row |= 1 << j
			}
		}
		m |= uint64(row) << (8 * (7 - i))
	}
	return m
}

// Step widths for runCoupled: stepWide lets the kernel take up to 4
// blocks of every slice per step, which is fastest on slices in cache;
// stepNarrow takes one, which is faster on slices streamed from DRAM.
const (
	stepNarrow = 1
	stepWide   = 4
)

// runCoupled applies the matrix to bytes [from, to) of every task's
// slices, with inputs computed from coupled pairs on the fly: input j of
// task t is the pointer pair ptrs[t*(2*cols+rows)+2j:][:2] = [A, B] and
// kinds[t*cols+j] selects A (0), A+B (1) or A+lo*B (2), lo a gfniMatrix;
// the rows output pointers follow the 2*cols inputs. blocks is the step
// width, stepNarrow or stepWide. fix, when not nil, uncouples parity
// pairs as the outputs are stored and walks each task's planes (see
// pairFix).
func (b *gfniBatch) runCoupled(from, to int, ptrs []unsafe.Pointer, kinds []byte, lo uint64, blocks int, fix *pairFix) {
	if from >= to || len(kinds) == 0 {
		return
	}
	t := tasks(len(kinds), b.cols)
	if len(ptrs) != t*(2*b.cols+b.rows) {
		panic(fmt.Sprintf("codec: coupled gfni batch of %d tasks has %d pointers", t, len(ptrs)))
	}
	var fp *unsafe.Pointer
	planes, stride, d := 1, 0, uint64(0)
	if fix != nil {
		if fix.planes < 1 || len(fix.ptrs) != t*fix.planes*b.rows {
			panic(fmt.Sprintf("codec: coupled gfni batch of %d tasks, %d planes has %d fix pointers", t, fix.planes, len(fix.ptrs)))
		}
		fp, planes, stride, d = &fix.ptrs[0], fix.planes, fix.stride, fix.d
	}
	gfniClayRows(b.rows, &b.bits[0], b.cols, from, to, &ptrs[0], &kinds[0], t, lo, blocks, fp, planes, stride, d)
}

// pairFix has runCoupled walk each task's planes p = 0..planes-1, bytes
// [from, to) + p*stride, and finish Clay's parity pairs as it stores
// them. ptrs holds, per task and plane, rows pointers: nil stores output
// i as computed; a pointer h makes output i the lo half U_lo of a pair
// whose hi half U_hi was stored earlier at h - p*stride + position. The
// kernel then stores C_lo = d*(U_hi+U_lo) as the output and
// C_hi = U_hi+C_lo over U_hi, so a lo half is written once, as C, and no
// separate pass reads the parity.
type pairFix struct {
	ptrs           []unsafe.Pointer
	planes, stride int
	d              uint64 // gfniMatrix(pftD)
}

func tasks(ptrs, stride int) int {
	if ptrs%stride != 0 {
		panic(fmt.Sprintf("codec: gfni batch of %d pointers, not a multiple of %d", ptrs, stride))
	}
	return ptrs / stride
}

// sparseRun computes bytes [from, to) of every task's out = sum over its
// terms of m_j * in_j: task t has terms[t] terms, its pointers
// [out, in_1..] and matrices [m_1..] (gfniMatrix form) follow the previous
// task's in ptrs and mats.
func sparseRun(from, to int, ptrs []unsafe.Pointer, mats []uint64, terms []int) {
	if from >= to || len(terms) == 0 {
		return
	}
	if len(ptrs) != len(terms)+len(mats) {
		panic(fmt.Sprintf("codec: sparse gfni batch of %d tasks, %d terms has %d pointers", len(terms), len(mats), len(ptrs)))
	}
	var mp *uint64
	if len(mats) > 0 {
		mp = &mats[0]
	}
	gfniSparse(from, to, &ptrs[0], mp, &terms[0], len(terms))
}
