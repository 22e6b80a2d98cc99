package codec

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
)

// SurveyOptions configures Survey.
type SurveyOptions struct {
	// Failures lists the failure counts t to survey.
	Failures []int
	// Sample caps the patterns per t; 0 means every pattern. When there
	// are more, Sample distinct patterns are drawn with Seed.
	Sample int
	Seed   int64
	// Chunk is the shard chunk length in bytes (rounded up to
	// ShardMultiple); 0 means 64*alpha (64-byte sub-chunks).
	Chunk int
}

// SurveyRow summarises the repair of every surveyed pattern of t failures.
// Ratios are bytes actually sent by the helpers divided by the stripe's
// data (k chunks), measured by executing each plan on random data; every
// rebuilt chunk is checked byte for byte.
type SurveyRow struct {
	Code      string         `json:"code"`
	N         int            `json:"n"`
	K         int            `json:"k"`
	T         int            `json:"t"`
	Patterns  int            `json:"patterns"`
	Total     int            `json:"total_patterns"`
	Bad       int            `json:"bad"`
	MeanRatio float64        `json:"mean_ratio"`
	MaxRatio  float64        `json:"max_ratio"`
	Bound     float64        `json:"bound"`
	RS        float64        `json:"rs"`
	Methods   map[string]int `json:"methods"`
}

// Survey plans, executes and verifies the repair of failure patterns of c.
func Survey(ctx context.Context, c Regenerating, opt SurveyOptions) ([]SurveyRow, error) {
	n, k := c.TotalShards(), c.DataShards()
	chunk := opt.Chunk
	if chunk <= 0 {
		chunk = 64 * c.SubChunks()
	}
	sm := c.ShardMultiple()
	chunk = (chunk + sm - 1) / sm * sm
	rng := rand.New(rand.NewSource(opt.Seed))
	shards := make([][]byte, n)
	for i := range shards {
		shards[i] = make([]byte, chunk)
		if i < k {
			rng.Read(shards[i])
		}
	}
	if err := c.Encode(shards); err != nil {
		return nil, err
	}
	var rows []SurveyRow
	for _, t := range opt.Failures {
		if t < 1 || t > c.ParityShards() {
			return nil, fmt.Errorf("%w: %s cannot repair %d failures (1..%d)", ErrBadParams, c.Name(), t, c.ParityShards())
		}
		pats, total := patterns(n, t, opt.Sample, rng)
		row := SurveyRow{Code: c.Name(), N: n, K: k, T: t, Total: total, Bound: RepairBound(n, k, t), RS: 1, Methods: map[string]int{}}
		sum := 0.0
		for _, f := range pats {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			p, sent, err := executeRepair(c, shards, f)
			if err != nil {
				return nil, err
			}
			ratio := float64(sent) / float64(k*chunk)
			if ratio < row.Bound-1e-9 {
				return nil, fmt.Errorf("codec: %s %v: plan sends %.4f M, below the bound %.4f: planner bug", c.Name(), f, ratio, row.Bound)
			}
			row.Patterns++
			row.Methods[p.Method]++
			// Bad: the CORE baseline download did not solve the pattern, although
			// the bound promised a saving.
			if p.Method == MethodVirtual || p.Method == MethodAugmented || (p.Method == MethodConventional && row.Bound < 1 && c.SubChunks() > 1) {
				row.Bad++
			}
			sum += ratio
			row.MaxRatio = max(row.MaxRatio, ratio)
		}
		row.MeanRatio = math.Round(sum/float64(row.Patterns)*1e6) / 1e6
		rows = append(rows, row)
	}
	return rows, nil
}

// executeRepair runs the plan for failed on the stripe (helper side, then
// relayer side), checks the result and returns the bytes sent.
func executeRepair(c Regenerating, shards [][]byte, failed []int) (*Plan, int, error) {
	p, err := c.RepairPlan(failed)
	if err != nil {
		return nil, 0, err
	}
	chunk := len(shards[0])
	sent := make([][]byte, len(p.Helpers))
	total := 0
	for i := range p.Helpers {
		h := &p.Helpers[i]
		if slices.Contains(failed, h.Shard) || slices.Contains(p.Virtual, h.Shard) {
			return nil, 0, fmt.Errorf("%w: %s %v: helper %d is not available", ErrBadPlan, c.Name(), failed, h.Shard)
		}
		if sent[i], err = h.Produce(p.SubChunks, shards[h.Shard], nil); err != nil {
			return nil, 0, err
		}
		total += len(sent[i])
	}
	out := make([][]byte, len(p.Failed))
	if err := p.Rebuild(chunk, sent, out); err != nil {
		return nil, 0, err
	}
	for i, f := range p.Failed {
		if !bytes.Equal(out[i], shards[f]) {
			return nil, 0, fmt.Errorf("codec: %s %v (%s): rebuilt shard %d differs from the original", c.Name(), failed, p.Method, f)
		}
	}
	return p, total, nil
}

// patterns returns the t-subsets of [0,n) (all, or sample distinct random
// ones when there are more) and the total count.
func patterns(n, t, sample int, rng *rand.Rand) ([][]int, int) {
	all := combinations(seq(n), t)
	if sample <= 0 || len(all) <= sample {
		return all, len(all)
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:sample], len(all)
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
