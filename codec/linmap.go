package codec

import (
	"fmt"

	"github.com/klauspost/reedsolomon"
)

// linmap applies a fixed GF(2^8) matrix to byte slices position-wise:
// out[i] = sum_j m[i][j] * in[j]. It is the one bulk kernel behind inner
// decodes, PM encoding and every repair matrix.
//
// Two strategies, chosen once per matrix:
//   - sparse: one SIMD mul-XOR per nonzero entry, processed in cache-sized
//     segments. Repair matrices are mostly sparse (a Clay single repair has
//     about n nonzeros per output row).
//   - fused: a reedsolomon encoder with the matrix as custom parity rows,
//     whose kernels read each input once for many outputs. Used for dense
//     matrices that fit the library's 256-shard limit.
type linmap struct {
	rows, cols int
	terms      [][]term // sparse form, per output row
	fused      reedsolomon.Encoder
	seg        int // bytes per pass of the sparse kernel
}

type term struct {
	col int
	c   byte
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
				l.terms[i] = append(l.terms[i], term{j, c})
				nnz++
			}
		}
	}
	if l.rows+l.cols <= 256 && l.rows > 1 && 2*nnz > l.rows*l.cols {
		enc, err := reedsolomon.New(cols, l.rows, reedsolomon.WithCustomMatrix(m), reedsolomon.WithMaxGoroutines(1))
		if err != nil {
			return nil, fmt.Errorf("codec: fused linmap: %w", err)
		}
		l.fused = enc
	}
	return l, nil
}

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
	if l.fused != nil && size > 0 {
		shards := make([][]byte, 0, l.rows+l.cols)
		shards = append(shards, in...)
		for _, o := range out {
			shards = append(shards, o[:size])
		}
		if err := l.fused.Encode(shards); err != nil {
			panic(fmt.Sprintf("codec: fused linmap: %v", err))
		}
		return
	}
	for off := 0; off < size; off += l.seg {
		end := min(off+l.seg, size)
		for i, ts := range l.terms {
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

// nonzeros counts the nonzero entries, the work of the sparse kernel.
func (l *linmap) nonzeros() int {
	n := 0
	for _, ts := range l.terms {
		n += len(ts)
	}
	return n
}
