package codec

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// refMul is the scalar reference for one task: out_i = sum_j m[i][j]*in_j.
func refMul(m [][]byte, in [][]byte, n int) [][]byte {
	out := make([][]byte, len(m))
	for i, row := range m {
		out[i] = make([]byte, n)
		for j, c := range row {
			for p := 0; p < n; p++ {
				out[i][p] ^= gfMul(c, in[j][p])
			}
		}
	}
	return out
}

func TestGFNIMatrixMultiplies(t *testing.T) {
	// The bit matrix must agree with the field for every pair.
	for c := 0; c < 256; c++ {
		m := gfniMatrix(byte(c))
		for x := 0; x < 256; x++ {
			var got byte
			for i := 0; i < 8; i++ {
				row := byte(m >> (8 * (7 - i)))
				if bitsParity(row & byte(x)) {
					got |= 1 << i
				}
			}
			if want := gfMul(byte(c), byte(x)); got != want {
				t.Fatalf("gfniMatrix(%#x) * %#x = %#x, want %#x", c, x, got, want)
			}
		}
	}
}

func bitsParity(b byte) bool {
	b ^= b >> 4
	b ^= b >> 2
	b ^= b >> 1
	return b&1 != 0
}

func TestGFNIBatchMatchesReference(t *testing.T) {
	if !hasGFNI {
		t.Skip("no AVX-512 GFNI on this CPU: the library path is used instead")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for rows := 1; rows <= gfniMaxRows; rows++ {
		for _, cols := range []int{1, 2, 5, 12} {
			for _, n := range []int{1, 63, 64, 65, 200, 1000} {
				m := newMatrix(rows, cols)
				for i := range m {
					for j := range m[i] {
						m[i][j] = byte(rng.IntN(256))
					}
				}
				b, err := newGFNIBatch(m)
				if err != nil {
					t.Fatal(err)
				}
				const tasks = 3
				var ptrs []unsafe.Pointer
				ins := make([][][]byte, tasks)
				outs := make([][][]byte, tasks)
				for tk := range tasks {
					for j := 0; j < cols; j++ {
						in := make([]byte, n+64) // guard bytes after n
						for p := range in[:n] {
							in[p] = byte(rng.IntN(256))
						}
						ins[tk] = append(ins[tk], in)
						ptrs = append(ptrs, unsafe.Pointer(&in[0]))
					}
					for i := 0; i < rows; i++ {
						out := bytes.Repeat([]byte{0xa5}, n+64)
						outs[tk] = append(outs[tk], out)
						ptrs = append(ptrs, unsafe.Pointer(&out[0]))
					}
				}
				b.run(n, ptrs)
				for tk := range tasks {
					want := refMul(m, ins[tk], n)
					for i := range want {
						if !bytes.Equal(outs[tk][i][:n], want[i]) {
							t.Fatalf("%dx%d n=%d task %d row %d differs", rows, cols, n, tk, i)
						}
						for p := n; p < n+64; p++ {
							if outs[tk][i][p] != 0xa5 {
								t.Fatalf("%dx%d n=%d task %d row %d: byte %d past the end was written", rows, cols, n, tk, i, p)
							}
						}
					}
				}
			}
		}
	}
}

// The pair transforms run in place: outputs alias inputs.
func TestGFNIBatchInPlace(t *testing.T) {
	if !hasGFNI {
		t.Skip("no AVX-512 GFNI on this CPU: the library path is used instead")
	}
	m := [][]byte{{3, 2}, {2, 2}}
	b, err := newGFNIBatch(m)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{5, 64, 130, 4096} {
		hi, lo := make([]byte, n), make([]byte, n)
		for p := range hi {
			hi[p], lo[p] = byte(rng.IntN(256)), byte(rng.IntN(256))
		}
		want := refMul(m, [][]byte{hi, lo}, n)
		b.run(n, []unsafe.Pointer{unsafe.Pointer(&hi[0]), unsafe.Pointer(&lo[0]), unsafe.Pointer(&hi[0]), unsafe.Pointer(&lo[0])})
		if !bytes.Equal(hi, want[0]) || !bytes.Equal(lo, want[1]) {
			t.Fatalf("n=%d: in-place pair transform differs from the reference", n)
		}
	}
}
