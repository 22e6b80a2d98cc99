package codec

// tryAugment handles bad patterns of optimal-access codes (Clay failures in
// several y-sections). The union of the failed shards' repair planes is then
// below the cut-set bound, so no combination of it can work and CORE's
// virtual failure keeps the pattern cross-section. Instead:
//
//  1. add whole planes (sub-chunk z from every helper), each time the one
//     that most reduces the deficiency rank([D;T]) - rank(D), until the
//     targets T are in the span of the download set D;
//  2. prune: solve with the downloads in a chosen order; downloads dependent
//     on earlier ones and downloads the solution does not use are dropped.
//     Two orders are tried (union first, added planes first) and the
//     cheaper plan is kept.
//
// It is a heuristic upper bound, not an optimum (msr-codes.md §4.4).
func (p *planner) tryAugment(g *generator, failed, helpers []int, base []download) *Plan {
	cp := func(r []byte) []byte { return append([]byte(nil), r...) }
	bD := newBasis(g.width, 0)
	inBase := make([]bool, g.alpha)
	for _, d := range base {
		bD.insert(cp(g.functional(d)))
		if d.z >= 0 {
			inBase[d.z] = true
		}
	}
	// Work modulo span(D): the deficiency is the rank of the targets
	// reduced by D (tRes), and a candidate plane P lowers it by
	// rank(P') - (rank(tRes + P') - rank(tRes)), P' = P reduced by D. So
	// each candidate costs one reduction against the big basis.
	var targets [][]byte
	for _, f := range failed {
		for z := 0; z < g.alpha; z++ {
			v := cp(g.row(f, z))
			bD.reduce(v)
			targets = append(targets, v)
		}
	}
	tRes := smallBasis(g.width, targets)
	var extra []download
	reduced := make([][]byte, len(helpers))
	for tRes.rank() > 0 {
		deficiency := tRes.rank()
		// Ties (often no single plane helps: for (20,10) the deficiency
		// only drops once most planes of one digit value are in) go to the
		// lowest plane, which fills such a row of planes in order.
		bestZ, bestDef := -1, deficiency+1
		for z := 0; z < g.alpha; z++ {
			if inBase[z] {
				continue
			}
			for i, h := range helpers {
				reduced[i] = cp(g.row(h, z))
				bD.reduce(reduced[i])
			}
			rP := smallBasis(g.width, reduced).rank()
			rTP := tRes.rankIncrease(reduced)
			if nd := deficiency - rP + rTP; nd < bestDef {
				bestZ, bestDef = z, nd
			}
		}
		if bestZ < 0 {
			return nil
		}
		inBase[bestZ] = true
		first := bD.rank()
		for _, h := range helpers {
			extra = append(extra, download{h: h, z: bestZ})
			bD.insert(cp(g.row(h, bestZ)))
		}
		// Bring the residual targets up to date against the new rows only:
		// they are already reduced by the earlier ones.
		added := &basis{width: bD.width, rows: bD.rows[first:], piv: bD.piv[first:]}
		for _, v := range tRes.rows {
			added.reduce(v)
		}
		tRes = smallBasis(g.width, tRes.rows)
	}
	var best *Plan
	for _, ds := range [][]download{append(append([]download(nil), base...), extra...), append(append([]download(nil), extra...), base...)} {
		pl := p.solvePlan(g, ds, failed, MethodAugmented, nil)
		if pl != nil && (best == nil || pl.Downloads() < best.Downloads()) {
			best = pl
		}
	}
	return best
}

// smallBasis returns the echelon basis of copies of rows.
func smallBasis(width int, rows [][]byte) *basis {
	b := newBasis(width, 0)
	for _, r := range rows {
		b.insert(append([]byte(nil), r...))
	}
	return b
}
