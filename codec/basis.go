package codec

// basis is an echelon basis of row vectors over GF(2^8), built by inserting
// rows one at a time. Each stored row is normalised to a leading 1 at its
// pivot and reduced against every earlier row, so reducing a vector against
// the rows in insertion order clears all pivots. Row operations are whole-row
// SIMD mul-XORs: elimination on a (20,10) Clay plan is ~400 rows of ~1400
// bytes, which per-byte Go loops would make the bottleneck of planning.
//
// A row may carry a tracking tail (the last track bytes) that is reduced
// along with it but never chosen as pivot. Inserting download i with a unit
// vector e_i in its tail makes the tail of a reduced target the combination
// of downloads that produces it.
type basis struct {
	width int // pivot columns
	track int // tracking columns after width
	rows  [][]byte
	piv   []int
}

func newBasis(width, track int) *basis {
	return &basis{width: width, track: track}
}

func (b *basis) rank() int { return len(b.rows) }

// reduce clears every pivot of b in v (length width+track), in place.
func (b *basis) reduce(v []byte) {
	for i, r := range b.rows {
		if c := v[b.piv[i]]; c != 0 {
			mulXor(c, r, v)
		}
	}
}

// leading returns the first nonzero column of v within width, or -1.
func (b *basis) leading(v []byte) int {
	for j, x := range v[:b.width] {
		if x != 0 {
			return j
		}
	}
	return -1
}

// insert reduces v and adds it when it is independent. v is taken over.
func (b *basis) insert(v []byte) bool {
	b.reduce(v)
	p := b.leading(v)
	if p < 0 {
		return false
	}
	if c := v[p]; c != 1 {
		mulSet(gfInv(c), v, v)
	}
	b.rows = append(b.rows, v)
	b.piv = append(b.piv, p)
	return true
}

// rankIncrease is how much the rank would grow if rows were inserted,
// without changing b.
func (b *basis) rankIncrease(rows [][]byte) int {
	tmp := newBasis(b.width, 0)
	for _, r := range rows {
		v := append([]byte(nil), r[:b.width]...)
		b.reduce(v)
		tmp.insert(v)
	}
	return tmp.rank()
}
