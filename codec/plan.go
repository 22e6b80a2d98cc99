package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrBadPlan is returned when a plan does not fit the data handed to it
// (wrong helper output length, unknown helper, malformed matrix).
var ErrBadPlan = errors.New("codec: bad repair plan")

// Repair methods recorded in Plan.Method.
const (
	// MethodMSR is single-node regenerating repair at d*beta.
	MethodMSR = "msr"
	// MethodCORE is CORE's baseline: every survivor sends its single-repair
	// download for every failed shard; the pattern was good.
	MethodCORE = "core"
	// MethodVirtual is CORE with a virtual failure pattern: the survivors in
	// Plan.Virtual are treated as failed (they send nothing).
	MethodVirtual = "core-virtual"
	// MethodAugmented is a Clay cross-section plan: the union of repair
	// planes plus extra planes, pruned sub-chunk by sub-chunk.
	MethodAugmented = "core-augmented"
	// MethodConventional downloads k whole shards and decodes.
	MethodConventional = "conventional"
)

// Plan is a repair plan: which bytes each helper sends and how the relayer
// combines them. It is deterministic for (code, failed) and JSON-serialisable
// so a coordinator can ship it to helpers and relayer.
//
// Wire format, per stripe: a shard chunk of length L (a multiple of the
// code's ShardMultiple) is alpha sub-chunks of sc = L/alpha bytes, sub-chunk
// z at offset z*sc. Helper i sends Helpers[i].Outputs() sub-chunks of sc
// bytes back to back (OutputLen). The relayer's inputs are all helper
// outputs concatenated in Helpers order (the download list); output row
// f*alpha+z of Relay is sub-chunk z of shard Failed[f].
type Plan struct {
	Code       string       `json:"code"`
	Version    int          `json:"version"`
	DataShards int          `json:"k"`
	SubChunks  int          `json:"alpha"`
	Failed     []int        `json:"failed"`
	Method     string       `json:"method"`
	Virtual    []int        `json:"virtual,omitempty"`
	Helpers    []HelperTask `json:"helpers"`
	// Relay is len(Failed)*alpha rows by Downloads() columns. When Stages
	// is set it has len(Failed)*alpha more columns, standing for the
	// outputs themselves: the rows of Stages[s] are computed in stage s
	// and may use the outputs of earlier stages (a chained relay, cheaper
	// for Clay multi-failure repair).
	Relay  [][]byte `json:"relay"`
	Stages [][]int  `json:"stages,omitempty"`

	once   sync.Once
	stages []relayStage
	err    error
}

// relayStage is one linear pass of the relayer.
type relayStage struct {
	rows []int // output rows computed
	lm   *linmap
}

// HelperTask is what one helper computes from its local shard chunk. Exactly
// one of Runs and Coef is set. Runs lists raw sub-chunk runs (optimal
// access: the helper reads and sends them untouched). Coef lists linear
// combinations: output r is sum_s Coef[r][s] * sub-chunk s (product-matrix
// dot products).
type HelperTask struct {
	Shard int      `json:"shard"`
	Runs  []Run    `json:"runs,omitempty"`
	Coef  [][]byte `json:"coef,omitempty"`
}

// Run is Count consecutive sub-chunks starting at sub-chunk Start.
type Run struct {
	Start int `json:"start"`
	Count int `json:"count"`
}

// Outputs is the number of sub-chunks the helper sends.
func (t *HelperTask) Outputs() int {
	if t.Coef != nil {
		return len(t.Coef)
	}
	n := 0
	for _, r := range t.Runs {
		n += r.Count
	}
	return n
}

// OutputLen is the byte length of the helper's message for a shard chunk of
// chunkLen bytes: Outputs() * chunkLen/alpha.
func (t *HelperTask) OutputLen(alpha, chunkLen int) int {
	return t.Outputs() * (chunkLen / alpha)
}

// Produce is the helper side: it appends to dst what the helper must send
// for its local shard chunk and returns the extended slice. For Runs it is a
// plain copy of byte ranges (offset Start*sc, length Count*sc); for Coef the
// rows as one linear map, so each sub-chunk is read once for all outputs.
func (t *HelperTask) Produce(alpha int, chunk, dst []byte) ([]byte, error) {
	if alpha < 1 || len(chunk)%alpha != 0 {
		return dst, fmt.Errorf("%w: chunk of %d bytes is not a multiple of %d sub-chunks", ErrShardSize, len(chunk), alpha)
	}
	sc := len(chunk) / alpha
	for _, r := range t.Runs {
		if r.Start < 0 || r.Count < 0 || r.Start+r.Count > alpha {
			return dst, fmt.Errorf("%w: run %+v outside %d sub-chunks", ErrBadPlan, r, alpha)
		}
		dst = append(dst, chunk[r.Start*sc:(r.Start+r.Count)*sc]...)
	}
	if len(t.Coef) == 0 {
		return dst, nil
	}
	lm, err := coefLinmap(t.Coef, alpha)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	dst = slices.Grow(dst, len(t.Coef)*sc)[:start+len(t.Coef)*sc]
	in := subChunks(make([][]byte, 0, alpha), [][]byte{chunk}, alpha)
	out := subChunks(make([][]byte, 0, len(t.Coef)), [][]byte{dst[start:]}, len(t.Coef))
	lm.apply(in, out)
	return dst, nil
}

// coefMaps caches the kernel of each distinct coefficient matrix, keyed by
// its bytes: helpers run the same few matrices (one per failure pattern)
// for every stripe, and building the fused form costs far more than a call.
var coefMaps struct {
	sync.Mutex
	m map[string]*linmap
}

func coefLinmap(coef [][]byte, alpha int) (*linmap, error) {
	key := binary.AppendUvarint(make([]byte, 0, 4+len(coef)*alpha), uint64(alpha))
	for _, row := range coef {
		if len(row) != alpha {
			return nil, fmt.Errorf("%w: coefficient row of %d, want %d", ErrBadPlan, len(row), alpha)
		}
		key = append(key, row...)
	}
	coefMaps.Lock()
	defer coefMaps.Unlock()
	if lm, ok := coefMaps.m[string(key)]; ok {
		return lm, nil
	}
	lm, err := newLinmap(coef, alpha)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPlan, err)
	}
	if coefMaps.m == nil || len(coefMaps.m) >= maxCached {
		coefMaps.m = map[string]*linmap{}
	}
	coefMaps.m[string(key)] = lm
	return lm, nil
}

// Downloads is the total number of sub-chunks the helpers send.
func (p *Plan) Downloads() int {
	n := 0
	for i := range p.Helpers {
		n += p.Helpers[i].Outputs()
	}
	return n
}

// Ratio is the repair bandwidth as a fraction of the stripe's data M =
// k*alpha sub-chunks.
func (p *Plan) Ratio() float64 {
	return float64(p.Downloads()) / float64(p.DataShards*p.SubChunks)
}

// Helper returns the task of shard, or nil when shard sends nothing.
func (p *Plan) Helper(shard int) *HelperTask {
	for i := range p.Helpers {
		if p.Helpers[i].Shard == shard {
			return &p.Helpers[i]
		}
	}
	return nil
}

func (p *Plan) relayStages() ([]relayStage, error) {
	p.once.Do(func() {
		rows, cols := len(p.Failed)*p.SubChunks, p.Downloads()
		stages := p.Stages
		if stages == nil {
			stages = [][]int{seq(rows)}
		} else {
			cols += rows
		}
		if len(p.Relay) != rows {
			p.err = fmt.Errorf("%w: relay has %d rows, want %d", ErrBadPlan, len(p.Relay), rows)
			return
		}
		done := make([]bool, rows)
		for _, st := range stages {
			m := make([][]byte, len(st))
			for i, r := range st {
				if r < 0 || r >= rows || done[r] || len(p.Relay[r]) != cols {
					p.err = fmt.Errorf("%w: bad relay row %d in stages", ErrBadPlan, r)
					return
				}
				for j := cols - rows; j < cols && p.Stages != nil; j++ {
					if p.Relay[r][j] != 0 && !done[j-(cols-rows)] {
						p.err = fmt.Errorf("%w: relay row %d uses output %d before it is computed", ErrBadPlan, r, j-(cols-rows))
						return
					}
				}
				m[i] = p.Relay[r]
			}
			for _, r := range st {
				done[r] = true
			}
			l, err := newLinmap(m, cols)
			if err != nil {
				p.err = fmt.Errorf("%w: %w", ErrBadPlan, err)
				return
			}
			p.stages = append(p.stages, relayStage{rows: st, lm: l})
		}
		if slices.Contains(done, false) {
			p.err = fmt.Errorf("%w: stages do not cover every output", ErrBadPlan)
		}
	})
	return p.stages, p.err
}

// Rebuild is the relayer side: sent[i] is the message of Helpers[i] for one
// stripe, out[f] receives the rebuilt chunk of Failed[f] (allocated when
// nil or short). chunkLen is the shard chunk length of the stripe.
func (p *Plan) Rebuild(chunkLen int, sent [][]byte, out [][]byte) error {
	if p.SubChunks < 1 || chunkLen%p.SubChunks != 0 {
		return fmt.Errorf("%w: chunk of %d bytes is not a multiple of %d sub-chunks", ErrShardSize, chunkLen, p.SubChunks)
	}
	if len(sent) != len(p.Helpers) || len(out) != len(p.Failed) {
		return fmt.Errorf("%w: got %d helper messages and %d outputs, want %d and %d", ErrBadPlan, len(sent), len(out), len(p.Helpers), len(p.Failed))
	}
	stages, err := p.relayStages()
	if err != nil {
		return err
	}
	sc := chunkLen / p.SubChunks
	var in [][]byte
	for i := range p.Helpers {
		want := p.Helpers[i].OutputLen(p.SubChunks, chunkLen)
		if len(sent[i]) != want {
			return fmt.Errorf("%w: helper shard %d sent %d bytes, want %d", ErrBadPlan, p.Helpers[i].Shard, len(sent[i]), want)
		}
		for off := 0; off < want; off += sc {
			in = append(in, sent[i][off:off+sc])
		}
	}
	var dst [][]byte
	for f := range out {
		if len(out[f]) < chunkLen {
			out[f] = make([]byte, chunkLen)
		}
		out[f] = out[f][:chunkLen]
		for z := 0; z < p.SubChunks; z++ {
			dst = append(dst, out[f][z*sc:(z+1)*sc])
		}
	}
	if sc == 0 {
		return nil
	}
	if p.Stages != nil {
		in = append(in, dst...) // outputs of earlier stages are inputs
	}
	for _, st := range stages {
		outs := make([][]byte, len(st.rows))
		for i, r := range st.rows {
			outs[i] = dst[r]
		}
		st.lm.apply(in, outs)
	}
	return nil
}

// PushStep is one hop of a PUSH repair chain: partial += coef * local, where
// local is the hop's shard chunk and partial the running chunk of the lost
// shard (both alpha sub-chunks of equal size), and coef is the hop's
// alpha x alpha block from Linear.Coefficients (1x1 for RS).
func PushStep(coef [][]byte, local, partial []byte) error {
	a := len(coef)
	if a == 0 || len(local) != len(partial) || len(local)%a != 0 {
		return fmt.Errorf("%w: push step with %d coefficient rows, local %d bytes, partial %d bytes", ErrShardSize, a, len(local), len(partial))
	}
	sc := len(local) / a
	for r, row := range coef {
		if len(row) != a {
			return fmt.Errorf("%w: coefficient row of %d, want %d", ErrBadPlan, len(row), a)
		}
		out := partial[r*sc : (r+1)*sc]
		for s, c := range row {
			mulXor(c, local[s*sc:(s+1)*sc], out)
		}
	}
	return nil
}
