package codec

import (
	"crypto/subtle"
	"errors"

	"github.com/klauspost/reedsolomon"
)

// GF(2^8) with polynomial 0x11d, the field of klauspost/reedsolomon and
// jerasure (w=8). The scalar tables below serve the small matrix algebra of
// planning (inversion, elimination); bulk data always goes through the
// library's SIMD kernels (mulXor, mulSet).

type gfTables struct {
	exp [512]byte
	log [256]int
}

// gf is computed once at package load and never written afterwards.
var gf = buildGF()

func buildGF() *gfTables {
	t := &gfTables{}
	x := 1
	for i := 0; i < 255; i++ {
		t.exp[i] = byte(x)
		t.exp[i+255] = byte(x)
		t.log[x] = i
		x <<= 1
		if x&0x100 != 0 {
			x ^= 0x11d
		}
	}
	t.exp[510] = t.exp[0]
	t.exp[511] = t.exp[1]
	return t
}

func gfMul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gf.exp[gf.log[a]+gf.log[b]]
}

func gfInv(a byte) byte {
	if a == 0 {
		panic("codec: inverse of zero")
	}
	return gf.exp[255-gf.log[a]]
}

// gfPow returns a^e.
func gfPow(a byte, e int) byte {
	if e == 0 {
		return 1
	}
	if a == 0 {
		return 0
	}
	return gf.exp[(gf.log[a]*e)%255]
}

// ll is the stateless SIMD kernel set of the Reed-Solomon library.
var ll reedsolomon.LowLevel

// mulXor computes out ^= c*in over len(in) bytes.
func mulXor(c byte, in, out []byte) {
	switch c {
	case 0:
	case 1:
		subtle.XORBytes(out[:len(in)], out[:len(in)], in)
	default:
		ll.GalMulSliceXor(c, in, out)
	}
}

// mulSet computes out = c*in over len(in) bytes.
func mulSet(c byte, in, out []byte) {
	switch c {
	case 0:
		clear(out[:len(in)])
	case 1:
		copy(out, in)
	default:
		ll.GalMulSlice(c, in, out)
	}
}

// errSingular is returned by matrix inversion; callers wrap it.
var errSingular = errors.New("codec: singular matrix")

// newMatrix allocates an r x c zero matrix.
func newMatrix(r, c int) [][]byte {
	buf := make([]byte, r*c)
	m := make([][]byte, r)
	for i := range m {
		m[i] = buf[i*c : (i+1)*c : (i+1)*c]
	}
	return m
}

// matMul returns a*b.
func matMul(a, b [][]byte) [][]byte {
	out := newMatrix(len(a), len(b[0]))
	for i, row := range a {
		for j, v := range row {
			if v != 0 {
				mulXor(v, b[j], out[i])
			}
		}
	}
	return out
}

// matInvert returns the inverse of the square matrix m (m is not modified).
func matInvert(m [][]byte) ([][]byte, error) {
	n := len(m)
	work := newMatrix(n, 2*n)
	for i := range m {
		copy(work[i], m[i])
		work[i][n+i] = 1
	}
	for col := 0; col < n; col++ {
		piv := -1
		for r := col; r < n; r++ {
			if work[r][col] != 0 {
				piv = r
				break
			}
		}
		if piv < 0 {
			return nil, errSingular
		}
		work[col], work[piv] = work[piv], work[col]
		if c := work[col][col]; c != 1 {
			mulSet(gfInv(c), work[col], work[col])
		}
		for r := 0; r < n; r++ {
			if r != col && work[r][col] != 0 {
				mulXor(work[r][col], work[col], work[r])
			}
		}
	}
	out := newMatrix(n, n)
	for i := range out {
		copy(out[i], work[i][n:])
	}
	return out, nil
}
