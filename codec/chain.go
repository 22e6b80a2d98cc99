package codec

import "slices"

// chain rewrites the relay of a multi-failure plan of an optimal-access code
// into two stages when that takes fewer multiply-adds:
//
//   - stage 1 computes, with the full repair matrix, only the "cross"
//     sub-chunks: C(f', z) for z in the repair planes R_f of another failed
//     shard f;
//   - stage 2 then rebuilds each failed f like a single-node repair in which
//     the other failed shards act as helpers: from the downloads in R_f and
//     the stage-1 sub-chunks, about n terms per output instead of the
//     ~137 of a (20,10) cross-section CORE row.
//
// It needs the plan to still hold every survivor's R_f sub-chunks; pruned
// augmented plans may not, and then the plan keeps its single stage.
func (p *planner) chain(g *generator, pl *Plan) {
	if p.selection == nil || len(pl.Failed) < 2 || pl.Stages != nil {
		return
	}
	a, nd := g.alpha, pl.Downloads()
	ds := planDownloads(pl)
	width := nd + len(pl.Failed)*a
	rows := newMatrix(len(pl.Relay), width)
	inStage1 := make([]bool, len(pl.Relay))
	var stage2 []int
	for fi, f := range pl.Failed {
		planes, _ := p.selection(f)
		var cols []int       // relay columns of the stage-2 inputs
		var funcs []download // their functionals
		for j, d := range ds {
			if d.z >= 0 && slices.Contains(planes, d.z) {
				cols = append(cols, j)
				funcs = append(funcs, d)
			}
		}
		for fj, f2 := range pl.Failed {
			if fj == fi {
				continue
			}
			for _, z := range planes {
				cols = append(cols, nd+fj*a+z)
				funcs = append(funcs, download{h: f2, z: z})
				inStage1[fj*a+z] = true
			}
		}
		relay, ok := solve(g, funcs, []int{f})
		if !ok {
			return
		}
		for z, row := range relay {
			r := fi*a + z
			for j, c := range row {
				rows[r][cols[j]] = c
			}
		}
	}
	var stage1 []int
	for r := range pl.Relay {
		if inStage1[r] {
			stage1 = append(stage1, r)
			clear(rows[r]) // drop the stage-2 form solved above
			copy(rows[r], pl.Relay[r])
		} else {
			stage2 = append(stage2, r)
		}
	}
	if nonzeros(rows) >= nonzeros(pl.Relay) {
		return
	}
	pl.Relay, pl.Stages = rows, [][]int{stage1, stage2}
}

// planDownloads lists a plan's downloads in wire order.
func planDownloads(pl *Plan) []download {
	var ds []download
	for _, h := range pl.Helpers {
		for _, r := range h.Runs {
			for z := r.Start; z < r.Start+r.Count; z++ {
				ds = append(ds, download{h: h.Shard, z: z})
			}
		}
		for _, c := range h.Coef {
			ds = append(ds, download{h: h.Shard, z: -1, coef: c})
		}
	}
	return ds
}

func nonzeros(m [][]byte) int {
	n := 0
	for _, row := range m {
		for _, c := range row {
			if c != 0 {
				n++
			}
		}
	}
	return n
}
