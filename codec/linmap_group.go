package codec

import "slices"

// Sparse matrices whose rows nearly share their columns run faster as small
// dense groups on the gathered columns. A Clay single repair is the case:
// its relay has ~n nonzeros per row, so it is sparse overall, but the q
// outputs tied to one repair plane read almost the same downloads. The
// fused kernel reads each of those inputs once for the whole group and
// multiplies about twice as fast as the per-term kernel.

type rowGroup struct {
	rows, cols []int
	lm         *linmap // dense on cols
}

const (
	groupMaxCols = 2 * fusedMax // two column blocks at most
	groupMaxRows = fusedMax     // one row block
	// Grouping is greedy and quadratic in rows; bigger relays (CORE over
	// large alpha) stay plain sparse rather than slow down planning.
	groupMaxMatrixRows = 1024
)

// group collects rows into dense groups; the rows left over stay in l.rest.
func (l *linmap) group() error {
	l.rest = nil
	taken := make([]bool, l.rows)
	mark := make([]int, l.cols) // mark[j] == seed+1: column j is in the group of row seed
	for r := range l.rows {
		if l.rows > groupMaxMatrixRows || taken[r] || len(l.terms[r]) < 2 || len(l.terms[r]) > groupMaxCols {
			if !taken[r] {
				l.rest = append(l.rest, r)
			}
			continue
		}
		g := rowGroup{rows: []int{r}}
		for _, t := range l.terms[r] {
			mark[t.col] = r + 1
			g.cols = append(g.cols, t.col)
		}
		for s := r + 1; s < l.rows && len(g.rows) < groupMaxRows; s++ {
			if taken[s] {
				continue
			}
			extra := 0
			for _, t := range l.terms[s] {
				if mark[t.col] != r+1 {
					extra++
				}
			}
			// A row joins when at least half its columns are shared, so the
			// group stays dense.
			if len(g.cols)+extra > groupMaxCols || 2*extra > len(l.terms[s]) {
				continue
			}
			taken[s] = true
			g.rows = append(g.rows, s)
			for _, t := range l.terms[s] {
				if mark[t.col] != r+1 {
					mark[t.col] = r + 1
					g.cols = append(g.cols, t.col)
				}
			}
		}
		ok, err := l.addGroup(g)
		if err != nil {
			return err
		}
		if !ok {
			l.rest = append(l.rest, g.rows...)
		}
	}
	slices.Sort(l.rest)
	return nil
}

// addGroup builds the dense form of g and keeps it when it is dense
// enough to fuse (more than half nonzero); otherwise its rows stay sparse.
func (l *linmap) addGroup(g rowGroup) (bool, error) {
	slices.Sort(g.cols)
	sub := newMatrix(len(g.rows), len(g.cols))
	nnz := 0
	for i, r := range g.rows {
		for _, t := range l.terms[r] {
			j, _ := slices.BinarySearch(g.cols, t.col)
			sub[i][j] = t.c
			nnz++
		}
	}
	if !denseEnough(nnz, len(g.rows), len(g.cols)) {
		return false, nil // newLinmap would group it again, forever
	}
	lm, err := newLinmap(sub, len(g.cols))
	if err != nil {
		return false, err
	}
	g.lm = lm
	l.groups = append(l.groups, g)
	return true, nil
}

// applyGroups is apply for a grouped sparse matrix.
func (l *linmap) applyGroups(in, out [][]byte, size int) {
	hp := shardLists.Get().(*[][]byte)
	for i := range l.groups {
		g := &l.groups[i]
		if g.lm.dense == nil && !g.lm.fusedPays(size) {
			l.sparseRows(g.rows, in, out, size)
			continue
		}
		hs := (*hp)[:0]
		for _, c := range g.cols {
			hs = append(hs, in[c])
		}
		for _, r := range g.rows {
			hs = append(hs, out[r])
		}
		g.lm.apply(hs[:len(g.cols)], hs[len(g.cols):])
		clear(hs)
		*hp = hs[:0]
	}
	shardLists.Put(hp)
	l.sparseRows(l.rest, in, out, size)
}
