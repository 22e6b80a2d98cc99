package repair

import (
	"math"
	"time"
)

// Rates are a node's measured (or assumed) speeds, in bytes per second.
type Rates struct {
	// Net is the NIC rate per direction.
	Net float64 `json:"net"`
	// DiskRead and DiskWrite are sequential disk rates.
	DiskRead  float64 `json:"disk_read"`
	DiskWrite float64 `json:"disk_write"`
	// Latency is one request's round trip including queueing (the per-hop
	// tau of the PUSH model).
	Latency time.Duration `json:"latency"`
}

// CostModel holds the constants of the per-stripe repair time model
// (../shared/research/repair-anchors.md §5.1). Every formula is "the most
// loaded resource limits the pipeline" plus fixed latencies: the stages of
// a repair overlap, so the slowest one sets the pace.
type CostModel struct {
	// Default rates, for nodes nothing has been measured on yet.
	Default Rates `json:"default"`
	// Decode is the conventional (RS-style) decode throughput of one
	// relayer, bytes of rebuilt shard per second; MSRDecode the same for
	// regenerating plans (Clay/PM relayers do more arithmetic per byte).
	Decode    float64 `json:"decode"`
	MSRDecode float64 `json:"msr_decode"`
	// SRU is the slice a PUSH chain pipelines, in bytes.
	SRU int `json:"sru"`
	// Setup is the fixed cost of one task: planning, connection set-up,
	// verification and the manifest switch.
	Setup time.Duration `json:"setup"`
	// Straggler: a helper slower than this fraction of the median helper
	// is left out of chains and PULL reads when enough others remain.
	Straggler float64 `json:"straggler"`
}

// DefaultCostModel describes a production node: 10 GbE, one HDD-class
// data disk per shard server, a modern core for decoding. The worker
// replaces Rates with measurements as repairs run.
func DefaultCostModel() CostModel {
	return CostModel{
		Default: Rates{
			Net:       1.25e9, // 10 Gb/s
			DiskRead:  200e6,  // one HDD, sequential
			DiskWrite: 200e6,
			Latency:   500 * time.Microsecond,
		},
		Decode:    1e9,   // klauspost/reedsolomon, one core
		MSRDecode: 400e6, // Clay/PM relayer, one core
		SRU:       1 << 20,
		Setup:     20 * time.Millisecond,
		Straggler: 0.7,
	}
}

// Load is how busy a node already is with repairs: the effective rates
// of a node running L other transfers are its rates / (1+L).
type Load float64

// shape is the stripe-group geometry a cost depends on.
type shape struct {
	n, k, t int
	b       float64 // bytes per shard file
	gamma   float64 // CORE: blocks into the relayer (Γ); 0 when not MSR
}

// eff returns r shared with load others.
func eff(r Rates, l Load) Rates {
	f := 1 + math.Max(0, float64(l))
	return Rates{Net: r.Net / f, DiskRead: r.DiskRead / f, DiskWrite: r.DiskWrite / f, Latency: r.Latency}
}

// slowest returns the element-wise minimum rates (maximum latency).
func slowest(rs []Rates) Rates {
	if len(rs) == 0 {
		return Rates{}
	}
	out := rs[0]
	for _, r := range rs[1:] {
		out.Net = math.Min(out.Net, r.Net)
		out.DiskRead = math.Min(out.DiskRead, r.DiskRead)
		out.DiskWrite = math.Min(out.DiskWrite, r.DiskWrite)
		out.Latency = max(out.Latency, r.Latency)
	}
	return out
}

func maxf(xs ...float64) float64 {
	m := 0.0
	for _, x := range xs {
		if x > m && !math.IsInf(x, 0) {
			m = x
		}
	}
	return m
}

// div returns a/b, treating an unknown (zero) rate as infinitely fast so a
// missing measurement never dominates a prediction.
func div(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// predict returns the model's time in seconds for method m. dests are the
// destinations' rates (the first is the relayer for PULL-Rep, PUSH-Rep and
// CORE), helpers the rates of the helpers the method reads from.
func (cm CostModel) predict(m Method, s shape, dests, helpers []Rates) float64 {
	if len(dests) == 0 || len(helpers) == 0 {
		return math.Inf(1)
	}
	h := slowest(helpers)
	d := slowest(dests)
	relay := dests[0]
	t, k, b := float64(s.t), float64(s.k), s.b
	lat := h.Latency.Seconds() + relay.Latency.Seconds()
	setup := cm.Setup.Seconds()
	switch m {
	case PullRep:
		// The relayer takes in k blocks (incast), decodes t and forwards t-1.
		return maxf(div(k*b, relay.Net), div((t-1)*b, relay.Net), div(b, h.Net), div(b, h.DiskRead),
			div(b, d.DiskWrite), div(t*b, cm.Decode)) + lat + setup
	case PullSur:
		// Every destination decodes its own shard from k helpers; each
		// helper serves all t destinations.
		return maxf(div(k*b, d.Net), div(t*b, h.Net), div(b, h.DiskRead), div(b, d.DiskWrite),
			div(b, cm.Decode)) + lat + setup
	case PushRep:
		// One chain of k helpers carries t partial sums to the relayer,
		// which keeps one and forwards t-1.
		hop := div(float64(cm.SRU), math.Min(h.Net, h.DiskRead)) + h.Latency.Seconds()
		return maxf(div(t*b, h.Net), div(t*b, relay.Net), div(b, h.DiskRead), div(b, d.DiskWrite)) + k*hop + setup
	case PushSur:
		// t chains, one per lost shard, rotated over the n-t survivors so
		// that each helper forwards e blocks; a helper reads its block once.
		e := math.Max(1, t*k/float64(s.n-s.t))
		hop := div(float64(cm.SRU), math.Min(h.Net, h.DiskRead)) + h.Latency.Seconds()
		return maxf(div(b, d.Net), div(e*b, h.Net), div(b, h.DiskRead), div(b, d.DiskWrite)) + k*hop + setup
	case Core:
		if s.gamma <= 0 {
			return math.Inf(1)
		}
		// The relayer downloads Γ blocks from the n-t helpers (each sends
		// Γ/(n-t) blocks and reads about as much), solves, keeps one shard
		// and forwards t-1.
		per := s.gamma / float64(s.n-s.t)
		return maxf(div(s.gamma*b, relay.Net), div((t-1)*b, relay.Net), div(per*b, h.Net), div(per*b, h.DiskRead),
			div(b, d.DiskWrite), div(t*b, cm.MSRDecode)) + lat + setup
	}
	return math.Inf(1)
}

// bytesMoved is the network traffic the model expects for method m.
func (s shape) bytesMoved(m Method) float64 {
	t, k, b := float64(s.t), float64(s.k), s.b
	switch m {
	case PullRep:
		return k*b + (t-1)*b
	case PullSur:
		return t * k * b
	case PushRep:
		return k*t*b + (t-1)*b // k hops of t partial sums, then forwarding
	case PushSur:
		return t * k * b // each chain: k hops of one block
	case Core:
		return s.gamma*b + (t-1)*b
	}
	return 0
}
