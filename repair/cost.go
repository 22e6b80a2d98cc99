package repair

import (
	"errors"
	"math"
	"time"
)

var errBadModel = errors.New("repair: cost model constants must be finite and not negative")

// Rates are a node's measured (or assumed) speeds, in bytes per second.
type Rates struct {
	// Net is the NIC rate per direction.
	Net float64 `json:"net"`
	// DiskRead and DiskWrite are sequential disk rates; DiskWrite is the
	// durable (fsync'd) rate, which is what a repair waits for.
	DiskRead  float64 `json:"disk_read"`
	DiskWrite float64 `json:"disk_write"`
	// Latency is one request's round trip including queueing (the per-hop
	// tau of the PUSH model).
	Latency time.Duration `json:"latency"`
}

// CostModel holds the constants of the per-stripe repair time model (t
// lost blocks of one stripe rebuilt onto t new nodes, per method; see the
// README's Repair section and BENCHMARKS.md). Every formula is "the most
// loaded resource limits the pipeline" plus fixed latencies: the stages of
// a repair overlap, so the slowest one sets the pace.
//
// Besides links and disks the model counts CPU: on small machines (and
// whenever many shard servers share a host) moving a byte through a shard
// server's data path and the codec arithmetic cost more than the wire.
type CostModel struct {
	// Default rates, for nodes nothing has been measured on yet.
	Default Rates `json:"default"`
	// Decode is how many bytes of survivor data one core combines per
	// second into one rebuilt shard (GF multiply-add): rebuilding t shards
	// from k costs t·k·b/Decode core-seconds, whether one relayer does it
	// (PULL) or the chain's hops share it (PUSH).
	Decode float64 `json:"decode"`
	// MSRDecode is the rebuilt bytes per core-second of a regenerating
	// (Clay/PM) repair, the helpers' encoding and the relayer's solve
	// together.
	MSRDecode float64 `json:"msr_decode"`
	// Move is how many bytes per second one core pushes through a shard
	// server's data path: reading or writing a shard file with its
	// checksums, sending or receiving it over HTTP. A byte sent between
	// servers costs it twice (sender and receiver).
	Move float64 `json:"move"`
	// Cores is the number of CPU cores of one host, shared by the shard
	// servers on it; 0 leaves CPU out of the model.
	Cores float64 `json:"cores"`
	// Fsync is the time of one small durable write (a shard file's or a
	// manifest's fsync); a host's disk does them one at a time.
	Fsync time.Duration `json:"fsync"`
	// SRU is the slice a PUSH chain pipelines, in bytes.
	SRU int `json:"sru"`
	// Setup is the fixed cost of one task beyond its fsyncs: planning,
	// connection set-up, control requests.
	Setup time.Duration `json:"setup"`
	// Straggler: a helper slower than this fraction of the median helper
	// is left out of chains and PULL reads when enough others remain.
	Straggler float64 `json:"straggler"`
}

// DefaultCostModel describes a production node: 10 GbE, one HDD-class
// data disk per shard server, a few modern cores. Calibrate replaces the
// CPU and disk constants with this machine's; the worker learns network
// rates as repairs run.
func DefaultCostModel() CostModel {
	return CostModel{
		Default: Rates{
			Net:       1.25e9, // 10 Gb/s
			DiskRead:  200e6,  // one HDD, sequential
			DiskWrite: 200e6,
			Latency:   500 * time.Microsecond,
		},
		Decode:    1e9,   // klauspost/reedsolomon, one core
		MSRDecode: 400e6, // Clay/PM, one core
		Move:      1e9,   // read+CRC+HTTP, one core
		Cores:     4,
		Fsync:     2 * time.Millisecond,
		SRU:       1 << 20,
		Setup:     20 * time.Millisecond,
		Straggler: 0.7,
	}
}

// Validate checks the model's constants.
func (cm CostModel) Validate() error {
	for _, v := range []float64{cm.Default.Net, cm.Default.DiskRead, cm.Default.DiskWrite, cm.Decode, cm.MSRDecode, cm.Move, cm.Cores} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return errBadModel
		}
	}
	if cm.Fsync < 0 || cm.Setup < 0 || cm.SRU < 0 || cm.Straggler < 0 || cm.Straggler > 1 {
		return errBadModel
	}
	return nil
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

// Cost is the model's prediction for one task.
type Cost struct {
	// Seconds is the task's time on an otherwise idle cluster.
	Seconds float64 `json:"seconds"`
	// CPU is the core-seconds the task costs over all servers; Written
	// the bytes it stores durably and Fsyncs its durable writes. A batch
	// of tasks sharing hosts is limited by their sums (Batch).
	CPU     float64 `json:"cpu"`
	Written float64 `json:"written"`
	Fsyncs  float64 `json:"fsyncs"`
	// Bytes is the network traffic between servers.
	Bytes float64 `json:"bytes"`
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

// work is what a method asks of the servers' CPUs and disks, in bytes.
type work struct {
	read, moved, written float64 // data-path bytes
	combine              float64 // survivor bytes multiplied into rebuilt shards (RS arithmetic)
	msr                  float64 // rebuilt bytes of a regenerating repair
	servers              int     // servers taking part (how many cores can help)
}

func (s shape) work(m Method) work {
	t, k, b := float64(s.t), float64(s.k), s.b
	w := work{written: t * b, moved: s.bytesMoved(m), servers: s.k + s.t}
	switch m {
	case PullRep:
		w.read, w.combine = k*b, t*k*b
	case PullSur:
		w.read, w.combine = t*k*b, t*k*b
	case PushRep, PushSur:
		w.read, w.combine = k*b, t*k*b
	case Core:
		w.read, w.msr, w.servers = float64(s.n-s.t)*b, t*b, s.n
	case Copy:
		w.read, w.servers = t*b, 2*s.t
	}
	return w
}

// cpu returns the core-seconds of w.
func (cm CostModel) cpu(w work) float64 {
	return div(w.read+2*w.moved+w.written, cm.Move) + div(w.combine, cm.Decode) + div(w.msr, cm.MSRDecode)
}

// predict returns the model's cost of method m. dests are the
// destinations' rates (the first is the relayer for PULL-Rep, PUSH-Rep and
// CORE), helpers the rates of the helpers the method reads from.
func (cm CostModel) predict(m Method, s shape, dests, helpers []Rates) Cost {
	if len(dests) == 0 || len(helpers) == 0 {
		return Cost{Seconds: math.Inf(1)}
	}
	h := slowest(helpers)
	d := slowest(dests)
	relay := dests[0]
	t, k, b := float64(s.t), float64(s.k), s.b
	lat := h.Latency.Seconds() + relay.Latency.Seconds()
	w := s.work(m)
	c := Cost{CPU: cm.cpu(w), Written: w.written, Fsyncs: t, Bytes: w.moved}
	// The task's CPU spreads over the servers taking part, but no wider
	// than a host's cores; its fsyncs happen in parallel on t servers.
	cpu := 0.0
	if cm.Cores > 0 {
		cpu = c.CPU / math.Min(cm.Cores, float64(w.servers))
	}
	fixed := lat + cm.Setup.Seconds() + cm.Fsync.Seconds()
	var secs float64
	switch m {
	case PullRep:
		// The relayer takes in k blocks (incast), decodes t and forwards t-1.
		secs = maxf(div(k*b, relay.Net), div((t-1)*b, relay.Net), div(b, h.Net), div(b, h.DiskRead),
			div(b, d.DiskWrite), div(t*k*b, cm.Decode), cpu)
	case PullSur:
		// Every destination decodes its own shard from k helpers; each
		// helper serves all t destinations.
		secs = maxf(div(k*b, d.Net), div(t*b, h.Net), div(b, h.DiskRead), div(b, d.DiskWrite),
			div(k*b, cm.Decode), cpu)
	case PushRep:
		// One chain of k helpers carries t partial sums to the relayer,
		// which keeps one and forwards t-1.
		hop := div(float64(cm.SRU), math.Min(h.Net, h.DiskRead)) + h.Latency.Seconds()
		secs = maxf(div(t*b, h.Net), div(t*b, relay.Net), div(b, h.DiskRead), div(b, d.DiskWrite),
			div(t*b, cm.Decode), cpu) + k*hop
	case PushSur:
		// t chains, one per lost shard, rotated over the n-t survivors so
		// that each helper forwards e blocks; a helper reads its block once.
		e := math.Max(1, t*k/float64(s.n-s.t))
		hop := div(float64(cm.SRU), math.Min(h.Net, h.DiskRead)) + h.Latency.Seconds()
		secs = maxf(div(b, d.Net), div(e*b, h.Net), div(b, h.DiskRead), div(b, d.DiskWrite),
			div(e*b, cm.Decode), cpu) + k*hop
	case Copy:
		// Each destination copies one shard from its holder; the t copies
		// run at once, between distinct servers.
		secs = maxf(div(b, h.Net), div(b, d.Net), div(b, h.DiskRead), div(b, d.DiskWrite), cpu)
	case Core:
		if s.gamma <= 0 {
			return Cost{Seconds: math.Inf(1)}
		}
		// The relayer downloads Γ blocks from the n-t helpers (each sends
		// Γ/(n-t) blocks and reads about as much), solves, keeps one shard
		// and forwards t-1.
		per := s.gamma / float64(s.n-s.t)
		secs = maxf(div(s.gamma*b, relay.Net), div((t-1)*b, relay.Net), div(per*b, h.Net), div(per*b, h.DiskRead),
			div(b, d.DiskWrite), div(t*b, cm.MSRDecode), cpu)
	default:
		return Cost{Seconds: math.Inf(1)}
	}
	c.Seconds = secs + fixed
	return c
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
	case Copy:
		return t * b
	}
	return 0
}

// Add sums two costs as one job (the parts of an object run one after
// the other).
func (c Cost) Add(o Cost) Cost {
	return Cost{Seconds: c.Seconds + o.Seconds, CPU: c.CPU + o.CPU, Written: c.Written + o.Written,
		Fsyncs: c.Fsyncs + o.Fsyncs, Bytes: c.Bytes + o.Bytes}
}

// Batch predicts how long a worker takes to run jobs with the given
// costs, workers at a time, while the host's cores and disk are shared:
// share is the fraction of them this worker's repairs get (1/the number
// of shard servers on the host that repair at the same time; every live
// server coordinates about the same number of stripe groups). The answer
// is the most loaded of: the pool (job times over workers, never less
// than the longest job), the host's cores, and its disk (bytes at the
// durable write rate plus fsyncs, one at a time).
//
// A job's time in the pool is its idle time, or, when the host's cores are
// shared, its CPU at this server's share of them, whichever is longer: a
// server with little to repair still waits for its few jobs, each slowed
// by the others' work.
//
// peers, when known, are the CPU (core-seconds) of the batches the other
// servers of the host run meanwhile. The cores are then shared as a
// processor-sharing queue rather than in equal shares: this batch, of CPU
// c, ends when the host has done c of its own and min(c, p) of each
// peer's, since a peer with less than c to do finishes first and leaves
// its cores to the rest. That is what a host whose failures hit a few
// coordinators hard (large multipart objects) does; equal shares would
// predict the heaviest server several times too slow.
func (cm CostModel) Batch(jobs []Cost, workers int, share float64, peers []float64) float64 {
	if len(jobs) == 0 {
		return 0
	}
	workers = max(workers, 1)
	if share <= 0 || share > 1 {
		share = 1
	}
	slice := 0.0 // cores one job can count on
	if cm.Cores > 0 {
		slice = cm.Cores * share
		if peers != nil {
			slice = cm.Cores // bounded by the shared cores term below
		}
	}
	var sum, longest, cpu, disk float64
	for _, c := range jobs {
		secs := math.Max(c.Seconds, div(c.CPU, slice))
		sum += secs
		longest = math.Max(longest, secs)
		cpu += c.CPU
		disk += div(c.Written, cm.Default.DiskWrite) + c.Fsyncs*cm.Fsync.Seconds()
	}
	pool := math.Max(sum/float64(workers), longest)
	cores, diskShare := 0.0, share
	switch {
	case cm.Cores > 0 && peers != nil:
		host := cpu
		for _, p := range peers {
			host += math.Min(p, cpu)
		}
		cores = host / cm.Cores
		if host > 0 {
			diskShare = cpu / host // the peers' disk work taken as in proportion to their CPU
		}
	case cm.Cores > 0:
		cores = cpu / (cm.Cores * share)
	}
	return maxf(pool, cores, disk/diskShare)
}
