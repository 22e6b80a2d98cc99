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

// guarded is n random bytes followed by 64 guard bytes (zeros) that a
// kernel must not touch.
func guarded(rng *rand.Rand, n int) []byte {
	b := make([]byte, n+64)
	for p := range b[:n] {
		b[p] = byte(rng.IntN(256))
	}
	return b
}

// randomBatch is a random rows x cols matrix and its kernel form.
func randomBatch(t *testing.T, rng *rand.Rand, rows, cols int) ([][]byte, *gfniBatch) {
	t.Helper()
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
	return m, b
}

// coupledInput draws a random coupled pair of n-byte slices and a kind,
// and returns the pair's pointers, the kind, and the input the kernel must
// form from them: a (0), a+b (1) or a+lo*b (2).
func coupledInput(rng *rand.Rand, n int, lo byte) (ptrs [2]unsafe.Pointer, kind byte, in []byte) {
	a, b := guarded(rng, n), guarded(rng, n)
	kind = byte(rng.IntN(3))
	in = bytes.Clone(a[:n])
	for p := range in {
		switch kind {
		case 1:
			in[p] ^= b[p]
		case 2:
			in[p] ^= gfMul(lo, b[p])
		}
	}
	return [2]unsafe.Pointer{unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0])}, kind, in
}

// runCoupled must agree with the field for every row count (each has its
// own kernel, with 4, 2 or 1 blocks per step), both step widths, any
// kinds, lengths that exercise the multi-block, single-block and
// masked-tail loops, and with and without a pairFix. With one, each task
// walks 1-3 planes of n bytes, and a random half of each plane's outputs
// are lo halves, each uncoupled against its own hi buffer.
func TestGFNICoupledMatchesReference(t *testing.T) {
	if !hasGFNI {
		t.Skip("no AVX-512 GFNI on this CPU: the library path is used instead")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const lo, d = 0x8f, 0x35
	for rows := 1; rows <= gfniMaxRows; rows++ {
		for _, cols := range []int{1, 2, 5, 12} {
			for i, n := range []int{1, 63, 64, 65, 200, 1000, 1000} {
				blocks := []int{stepWide, stepNarrow}[i%2]
				withFix := (i+rows)%3 != 0
				planes := 1
				if withFix {
					planes = 1 + (i+cols)%3
				}
				L := planes * n // each slice: its planes back to back
				m, b := randomBatch(t, rng, rows, cols)
				const tasks = 3
				var ptrs, fixes []unsafe.Pointer
				var kinds []byte
				ins := make([][][]byte, tasks)
				outs := make([][][]byte, tasks)
				his := make([][][][]byte, tasks) // per task, plane, output: its hi buffer, or nil
				hiWas := make([][][][]byte, tasks)
				for tk := range tasks {
					for j := 0; j < cols; j++ {
						pair, kind, in := coupledInput(rng, L, lo)
						ins[tk] = append(ins[tk], in)
						kinds = append(kinds, kind)
						ptrs = append(ptrs, pair[:]...)
					}
					for i := 0; i < rows; i++ {
						out := bytes.Repeat([]byte{0xa5}, L+64)
						outs[tk] = append(outs[tk], out)
						ptrs = append(ptrs, unsafe.Pointer(&out[0]))
					}
					his[tk], hiWas[tk] = make([][][]byte, planes), make([][][]byte, planes)
					for p := range planes {
						for range rows {
							// Plane p addresses its hi half at fix - p*n +
							// position, position in [p*n, (p+1)*n): bytes
							// [p*n, (p+1)*n) of a buffer whose fix is &hi[p*n].
							var hi []byte
							var fp unsafe.Pointer
							if withFix && rng.IntN(2) == 0 {
								hi = guarded(rng, (p+1)*n)
								fp = unsafe.Pointer(&hi[p*n])
							}
							his[tk][p] = append(his[tk][p], hi)
							hiWas[tk][p] = append(hiWas[tk][p], bytes.Clone(hi))
							fixes = append(fixes, fp)
						}
					}
				}
				var fix *pairFix
				if withFix {
					fix = &pairFix{ptrs: fixes, planes: planes, stride: n, d: gfniMatrix(d)}
				}
				b.runCoupled(0, n, ptrs, kinds, gfniMatrix(lo), blocks, fix)
				for tk := range tasks {
					want := refMul(m, ins[tk], L)
					for p := range planes {
						for i := range want {
							wantHi := hiWas[tk][p][i]
							if wantHi != nil { // U_lo = want, U_hi = the hi buffer, both at [p*n, (p+1)*n)
								wantHi = bytes.Clone(wantHi)
								for q := p * n; q < (p+1)*n; q++ {
									cLo := gfMul(d, wantHi[q]^want[i][q])
									want[i][q], wantHi[q] = cLo, wantHi[q]^cLo
								}
							}
							if !bytes.Equal(his[tk][p][i], wantHi) {
								t.Fatalf("%dx%d n=%d blocks=%d task %d plane %d row %d: hi half differs (or was written outside its plane)", rows, cols, n, blocks, tk, p, i)
							}
						}
					}
					for i := range want {
						if !bytes.Equal(outs[tk][i][:L], want[i]) {
							t.Fatalf("%dx%d n=%d planes=%d blocks=%d task %d row %d differs", rows, cols, n, planes, blocks, tk, i)
						}
						for q := L; q < L+64; q++ {
							if outs[tk][i][q] != 0xa5 {
								t.Fatalf("%dx%d n=%d task %d row %d: byte %d past the end was written", rows, cols, n, tk, i, q)
							}
						}
					}
				}
			}
		}
	}
}

// The two encode paths of Clay must write the same parity: the batched
// kernels on this CPU, the library's fused encoders everywhere else. Shapes
// cover shortening (nu > 0), q up to 10, and sub-chunks that are not
// multiples of 64 (masked tails), down to one byte, on both the cached and
// the streamed kernel paths.
func TestClayEncodePathsAgree(t *testing.T) {
	if !hasGFNI {
		t.Skip("no AVX-512 GFNI on this CPU: only the library path exists here")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, name := range []string{"clay-2-2", "clay-4-2", "clay-6-3", "clay-5-3", "clay-8-4", "clay-10-4", "clay-9-5", "clay-10-10", "clay-12-4"} {
		c := mustParse(t, name).(*Clay)
		// 4196: a run of clay-10-10 outgrows streamTile, so
		// the streamed path splits it into byte windows, the last one short.
		for _, sc := range []int{1, 3, 64, 100, 1000, 4196} {
			L := c.alpha * sc
			want, got := make([][]byte, c.n), make([][]byte, c.n)
			for i := range want {
				want[i] = make([]byte, L)
				if i < c.k {
					for p := range want[i] {
						want[i][p] = byte(rng.IntN(256))
					}
				}
				got[i] = bytes.Clone(want[i])
			}
			cbW, _ := c.layout(want, L, nil)
			cbG, _ := c.layout(got, L, nil)
			if err := c.encodeFused(cbW, sc); err != nil {
				t.Fatal(err)
			}
			for _, streamed := range []bool{false, true} {
				for i := c.k; i < c.n; i++ {
					clear(got[i])
				}
				if err := c.encodeGFNI(cbG, sc, streamed); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if !bytes.Equal(want[i], got[i]) {
						t.Fatalf("%s sc=%d streamed=%v: shard %d differs between the library and gfni paths", name, sc, streamed, i)
					}
				}
			}
		}
	}
}

// The sparse kernel must agree with the field for rows of 0 to 9 terms
// (pairs and the odd one out), on windows [from, to) that exercise the
// 8-block, single-block and masked-tail loops, and write nothing outside
// the window.
func TestGFNISparseMatchesReference(t *testing.T) {
	if !hasGFNI {
		t.Skip("no AVX-512 GFNI on this CPU: the library path is used instead")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	const size = 1200
	ins := make([][]byte, 6)
	for i := range ins {
		ins[i] = make([]byte, size)
		for p := range ins[i] {
			ins[i][p] = byte(rng.IntN(256))
		}
	}
	for _, win := range [][2]int{{0, size}, {0, 1}, {5, 68}, {64, 64 + 512}, {100, 100 + 511}, {700, size}} {
		from, to := win[0], win[1]
		var ptrs []unsafe.Pointer
		var mats []uint64
		var terms []int
		var outs, want [][]byte
		for row := 0; row < 10; row++ {
			out := bytes.Repeat([]byte{0xa5}, size)
			w := bytes.Clone(out)
			clear(w[from:to])
			ptrs = append(ptrs, unsafe.Pointer(&out[0]))
			terms = append(terms, row)
			for range row {
				in, c := ins[rng.IntN(len(ins))], byte(rng.IntN(256))
				ptrs = append(ptrs, unsafe.Pointer(&in[0]))
				mats = append(mats, gfniMatrix(c))
				for p := from; p < to; p++ {
					w[p] ^= gfMul(c, in[p])
				}
			}
			outs, want = append(outs, out), append(want, w)
		}
		sparseRun(from, to, ptrs, mats, terms)
		for row := range outs {
			if !bytes.Equal(outs[row], want[row]) {
				t.Fatalf("window [%d,%d) row %d (%d terms) differs", from, to, row, row)
			}
		}
	}
}
