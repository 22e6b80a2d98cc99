package codec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// Every strategy of linmap (dense on the GFNI kernel or the library's
// fused encoders, sparse per row, grouped) must compute m x in exactly:
// shapes cover one row, more rows than one kernel block (16) or one fused
// block (10), wide matrices that get short segments, and sizes that span
// several segments with a masked tail.
func TestLinmapMatchesReference(t *testing.T) {
	skipUnderRace(t)
	rng := rand.New(rand.NewPCG(13, 14))
	for _, tc := range []struct {
		rows, cols int
		density    float64
	}{
		{1, 10, 1}, {10, 19, 1}, {17, 5, 1}, {40, 100, 1}, {3, 300, 0.9},
		{12, 40, 0.1}, {30, 30, 0.05}, {8, 8, 0.3}, {5, 1, 1},
	} {
		m := newMatrix(tc.rows, tc.cols)
		for i := range m {
			for j := range m[i] {
				if rng.Float64() < tc.density {
					m[i][j] = byte(rng.IntN(256))
				}
			}
		}
		lm, err := newLinmap(m, tc.cols)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{1, 100, lm.seg + 77, 3*lm.seg + 1} {
			name := fmt.Sprintf("%dx%d/density=%.2f/size=%d", tc.rows, tc.cols, tc.density, size)
			in := make([][]byte, tc.cols)
			for j := range in {
				in[j] = make([]byte, size)
				for p := range in[j] {
					in[j][p] = byte(rng.IntN(256))
				}
			}
			out := make([][]byte, tc.rows)
			for i := range out {
				out[i] = bytes.Repeat([]byte{0xa5}, size+64)
			}
			lm.apply(in, out)
			want := refMul(m, in, size)
			for i := range want {
				if !bytes.Equal(out[i][:size], want[i]) {
					t.Fatalf("%s: row %d differs", name, i)
				}
				if !bytes.Equal(out[i][size:], bytes.Repeat([]byte{0xa5}, 64)) {
					t.Fatalf("%s: row %d written past its %d bytes", name, i, size)
				}
			}
		}
	}
}
