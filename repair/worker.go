package repair

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Config configures a Worker.
type Config struct {
	// NodeID is this shard server's node ID.
	NodeID string
	// Grace is how long a server must be dead before its shards count as
	// lost and are rebuilt elsewhere. Long enough to ride out a reboot or
	// a deploy; a server back within it keeps its shards.
	Grace time.Duration
	// Workers is how many repair jobs run at once on this server.
	Workers int
	// Rate caps repair traffic over the whole cluster, bytes per second
	// (0: unlimited). Each server takes its share (Rate / live servers):
	// every server coordinates about that share of the stripes.
	Rate int64
	// ScrubRate is how many bytes per second the scrubber reads from this
	// server's shards to verify them (0: no scrubbing).
	ScrubRate int64
	// ScanInterval is how often the local manifests are walked for
	// affected stripe groups (less often when a walk is slow: see
	// walkPace) while anything may be degraded; on a healthy cluster a
	// scan skips the walk (scan_skip.go).
	ScanInterval time.Duration
	// ScrubInterval is the least time from the start of one scrub pass to
	// the start of the next. A pass over a server of large objects reads
	// for longer than that (ScrubRate paces it) and the next starts when
	// it ends; a pass over a server of small objects ends in moments, and
	// walking its manifests again at once verifies nothing new while
	// taking an idle cluster's CPU.
	ScrubInterval time.Duration
	// FullScanInterval bounds how long scans may skip the walk on a
	// cluster where nothing changed: the safety net of the skip rules.
	// At or below ScanInterval (0, say) every scan walks.
	FullScanInterval time.Duration
	// SyncInterval is how often this server compares the manifests it
	// shares with each live peer (range digests: antientropy.go) and
	// checks the keys that differ and were written over an interval ago,
	// so that a write that missed one live server (a transient error
	// there) is healed although nobody died or came back (0: only the
	// syncs at start and when a peer returns).
	SyncInterval time.Duration
	// Method forces a method family: "auto" (choose by predicted time),
	// "core", "push" or "pull".
	Method string
	// Retries and Backoff: a failed job is retried (re-planned with the
	// membership of the moment) after Backoff, doubling, at most Retries
	// times; then it waits for the next scan.
	Retries int
	Backoff time.Duration
	// Model holds the cost model's constants; measured rates replace its
	// defaults as repairs run.
	Model  CostModel
	Logger *slog.Logger
}

// DefaultConfig returns production defaults.
func DefaultConfig() Config {
	return Config{
		Grace:        10 * time.Minute, // a reboot or rolling deploy, not a dead disk
		Workers:      4,                // per server; all servers repair at once
		Rate:         0,                // unlimited: repair as fast as the cluster allows
		ScrubRate:    8 << 20,          // 8 MiB/s: a 10 TB server every ~2 weeks
		ScanInterval: 30 * time.Second,
		// Daily at most: a server of small objects, whose passes read
		// little, is still verified every day.
		ScrubInterval: 24 * time.Hour,
		// A walk of a million manifests takes seconds; hourly it costs
		// a fraction of a percent of a core.
		FullScanInterval: time.Hour,
		SyncInterval:     5 * time.Minute, // a missed write is whole again within 5-10 minutes
		Method:           Auto,
		Retries:          5,
		Backoff:          time.Second,
		Model:            DefaultCostModel(),
	}
}

// Validate checks the config.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("repair: config needs the node ID")
	case c.Grace < 0:
		return fmt.Errorf("repair: grace %s is negative", c.Grace)
	case c.Workers < 1:
		return fmt.Errorf("repair: %d workers, want at least 1", c.Workers)
	case c.ScrubInterval < 0:
		return fmt.Errorf("repair: scrub interval %s is negative", c.ScrubInterval)
	case c.Rate < 0 || c.ScrubRate < 0:
		return errors.New("repair: rates must not be negative")
	case c.ScanInterval <= 0:
		return fmt.Errorf("repair: scan interval %s must be positive", c.ScanInterval)
	case c.FullScanInterval < 0:
		return fmt.Errorf("repair: full scan interval %s is negative", c.FullScanInterval)
	case c.SyncInterval < 0:
		return fmt.Errorf("repair: sync interval %s is negative", c.SyncInterval)
	}
	switch c.Method {
	case "", Auto, "core", "push", "pull":
	default:
		return fmt.Errorf("repair: method %q, want auto, core, push or pull", c.Method)
	}
	return nil
}

// Store is the local metadata store (*metadata.Store).
type Store interface {
	EachManifest(ctx context.Context, fn func(*metadata.Manifest) error) error
	GetManifest(ctx context.Context, bucket, key string) (*metadata.Manifest, error)
}

// Membership is the gossip view (*cluster.Node).
type Membership interface {
	Members() []cluster.Member
}

// Shards is the shard-server client (*shardrpc.Client).
type Shards interface {
	PutShard(ctx context.Context, addr, fileID string, idx int, body io.Reader) (shardrpc.ShardInfo, error)
	GetShard(ctx context.Context, addr, fileID string, idx int, off, length int64) (io.ReadCloser, error)
	StatShard(ctx context.Context, addr, fileID string, idx int) (shardrpc.ShardInfo, error)
	GetManifest(ctx context.Context, addr, bucket, key string) (*metadata.Manifest, error)
	PutManifest(ctx context.Context, addr string, m *metadata.Manifest) (bool, metadata.Version, error)
}

// executor rebuilds the lost shards of a task onto its destinations,
// durable and verified against the task's CRCs.
type executor interface {
	Run(ctx context.Context, t Task) (Result, error)
}

// Worker finds the stripe groups this server coordinates that lost shards,
// plans and runs their repair and switches their manifests.
type Worker struct {
	cfg    Config
	log    *slog.Logger
	store  Store
	nodes  Membership
	shards Shards
	exec   executor
	// allowed are the methods exec can run (nil: all).
	allowed []Method
	started time.Time
	now     func() time.Time
	// calibrate: measure the data path when Run starts.
	calibrate     bool
	calibrateDir  string
	dataPathBytes func() int64
	writtenBytes  func() int64
	limit         *rate.Limiter
	m             *metrics
	// codes: every code met by name, built once (a Clay code's repair
	// plans are cached inside it, per failure set).
	codes codec.Cache

	mu       sync.Mutex
	queue    jobQueue
	inflight map[string]bool // manifest refs queued or running
	load     map[string]int  // node -> running task involvement
	rates    map[string]Rates
	stripes  shardrpc.StripeCounts
	counts   shardrpc.RepairCounts
	scrub    shardrpc.ScrubCounts
	batch    *shardrpc.RepairBatch
	batchT0  time.Time
	last     *shardrpc.RepairBatch
	recent   []shardrpc.RepairEvent
	waiting  map[string]bool
	// batchCosts are the predicted costs of the current batch's jobs.
	batchCosts []Cost
	// batchStale: batch.Predicted misses jobs or peer reports since it
	// was made (predictBatch).
	batchStale bool
	// lastShare is share() as of the last scan or enqueue.
	lastShare float64
	// peerCPU: the largest batch CPU each server of this host reported
	// during the current batch (hostPeers); nil when it has none.
	peerCPU map[string]float64
	// walk: the last full walk of the scan (scan_skip.go).
	walk walkState
	// prevNodes is each node's state at the last scan.
	prevNodes map[string]nodeMark
	// modelMu guards cfg.Model, which calibration refines while the
	// worker runs (model, setModel).
	modelMu sync.RWMutex
	// shunned: nodes a failed task blamed, until when the planner treats
	// them as suspect (see blamed).
	shunned map[string]time.Time
	wake    chan struct{}
	sync    chan struct{}
	// Full manifest syncs asked for (kickSync calls), those asked for
	// before the last full sync began, and the full syncs done: the
	// status's Sync counts.
	syncAsked, syncAnswered, syncsDone atomic.Int64
	// syncCalls counts the manifest and shard calls the per-key sync
	// rules made to peers; syncStats the range comparisons (guarded by
	// mu).
	syncCalls atomic.Int64
	syncStats syncCounters
	// syncSettle is how long an asked-for full sync first lets gossip
	// settle (2 s; tests shorten it).
	syncSettle time.Duration
	// mrf: writes that live servers missed (mrf.go); events wakes its
	// loop on membership changes.
	mrf    *mrfQueue
	events <-chan cluster.Event
	// walkDirty: something happened since the last walk that may have
	// left a group degraded (scan_skip.go).
	walkDirty atomic.Bool
}

// job is the repair of one object version: every part, same destinations,
// one manifest switch.
type job struct {
	bucket, key string
	version     metadata.Version
	lost        []int
	inPlace     bool // rebuild onto the same server (corrupt or missing shard)
	prio        int  // missing shards; most endangered first
	predicted   float64
	cost        Cost // the model's prediction, all parts
	attempt     int
	notBefore   time.Time

	// move: lost are shards on draining servers, to be moved (copied,
	// then switched), not rebuilt. Nothing of the group is missing.
	move bool
	// noncurrent: version is a noncurrent version of the key (a previous
	// version in the store), not its current manifest (worker_versions.go).
	noncurrent bool
}

// ref names the job's object version: the key for its current manifest,
// key@version for a noncurrent one, so both can be queued at once.
func (j *job) ref() string {
	if j.noncurrent {
		return j.bucket + "/" + j.key + "@" + j.version.String()
	}
	return j.bucket + "/" + j.key
}

// Options are the optional parts of a Worker.
type Options struct {
	// Executor runs tasks; nil means the built-in PULL executor.
	Executor executor
	// Methods the executor runs; nil means all (ignored for the built-in
	// executor, which only pulls).
	Methods []Method
	// Metrics, if set, receives the worker's Prometheus collectors.
	Metrics MetricsRegisterer
	// CalibratePath: Run first measures this server's own data path (a
	// small and a few-MiB shard PUT and GET) for the cost model.
	CalibratePath bool
	// CalibrateDir, if set, is where Run re-measures the disk now and
	// then (recalibrateDisk): the shard server's data directory.
	CalibrateDir string
	// DataPathBytes, if set, counts the byte-steps this server's data
	// path has run (shardserver.Server.DataPathBytes); Run learns the
	// model's Move rate from it (learnMove).
	DataPathBytes func() int64
	// WrittenBytes, if set, counts the shard bytes this server wrote
	// durably (shardserver.Server.WrittenBytes); the disk is re-measured
	// only while it stands still.
	WrittenBytes func() int64
	// Events, if set, are the gossip membership events
	// (cluster.Node.Events): a server's return wakes the healing of the
	// writes it missed at once rather than at the next poll (mrf.go).
	Events <-chan cluster.Event
}

// New returns a worker; Run starts it.
func New(cfg Config, store Store, nodes Membership, shards Shards, opt Options) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Method == "" {
		cfg.Method = Auto
	}
	if cfg.Model == (CostModel{}) {
		cfg.Model = DefaultCostModel()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{
		cfg: cfg, log: log, store: store, nodes: nodes, shards: shards,
		exec: opt.Executor, allowed: opt.Methods, calibrate: opt.CalibratePath, calibrateDir: opt.CalibrateDir,
		dataPathBytes: opt.DataPathBytes, writtenBytes: opt.WrittenBytes,
		now: time.Now, inflight: map[string]bool{}, load: map[string]int{}, rates: map[string]Rates{},
		waiting: map[string]bool{}, prevNodes: map[string]nodeMark{}, shunned: map[string]time.Time{},
		wake: make(chan struct{}, 1), sync: make(chan struct{}, 1), syncSettle: 2 * time.Second,
		counts: shardrpc.RepairCounts{ByMethod: map[string]int64{}},
		mrf:    newMRF(), events: opt.Events,
	}
	if w.exec == nil {
		w.exec = &pullExecutor{shards: shards, w: w, codes: &w.codes}
		w.allowed = []Method{PullRep}
	}
	w.limit = rate.NewLimiter(rate.Inf, 1<<20)
	m, err := newMetrics(opt.Metrics)
	if err != nil {
		return nil, err
	}
	w.m = m
	w.started = w.now()
	return w, nil
}

// Run scans, repairs and scrubs until ctx ends.
func (w *Worker) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	// NB: before calibration, which takes seconds: a server that returns
	// meanwhile is healed at once.
	wg.Go(func() { w.runMRF(ctx, w.events) })
	if w.calibrate {
		w.calibratePath(ctx)
	}
	for range w.cfg.Workers {
		wg.Go(func() { w.runJobs(ctx) })
	}
	wg.Go(func() { w.runSync(ctx) })
	if w.calibrateDir != "" {
		wg.Go(func() { w.recalibrateDisk(ctx, w.calibrateDir) })
	}
	if w.dataPathBytes != nil {
		wg.Go(func() { w.learnMove(ctx, w.dataPathBytes) })
	}
	if w.cfg.ScrubRate > 0 {
		wg.Go(func() { w.runScrub(ctx) })
	}
	w.kickSync()
	for {
		start := time.Now()
		if err := w.scan(ctx); err != nil && ctx.Err() == nil {
			w.log.Error("repair scan", "err", err)
			w.mu.Lock()
			w.stripes.ScanError = err.Error()
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-time.After(walkWait(w.cfg.ScanInterval, time.Since(start))):
		}
	}
}

// walkPace bounds the time the walks over every local manifest (the
// repair scan, the scrubber's) take: after a walk of d the next starts no
// sooner than walkPace*d later, so walking takes at most a fifth of a
// core however many objects the server holds. Without it a server with
// more manifests than it can walk in one interval (or twelve servers on
// one machine, as in regen dev) would walk back to back and keep its
// cores busy while idle.
const walkPace = 4

// walkWait is how long to wait after a walk that took took, for walks
// meant to start every interval.
func walkWait(interval, took time.Duration) time.Duration {
	return max(interval-took, walkPace*took)
}

// nodeView is the membership as one scan sees it.
type nodeView struct {
	self  string
	nodes map[string]NodeInfo
	// since: when each node's gossip state (alive, dead) last changed;
	// for a node not live, since when it is down.
	since map[string]time.Time
	// boot: when each node's process started, as it advertises.
	boot map[string]int64
	// replaced: dead nodes a live server was started to replace; their
	// shards are lost at once, without waiting for the grace period.
	replaced map[string]bool
}

func (w *Worker) view() nodeView {
	v := nodeView{self: w.cfg.NodeID, nodes: map[string]NodeInfo{}, since: map[string]time.Time{}, boot: map[string]int64{}, replaced: map[string]bool{}}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.nodes.Members() {
		if m.Role != cluster.RoleShard {
			continue
		}
		ni := NodeInfo{ID: m.ID, Addr: m.HTTP, Live: m.Alive(), Suspect: m.State == cluster.StateSuspect,
			Replaces: m.Replaces, Zone: m.Zone, Draining: m.Draining, Rates: w.rates[m.ID], Load: Load(w.load[m.ID]), Machine: m.Machine}
		if until, ok := w.shunned[m.ID]; ok && ni.Live && w.now().Before(until) {
			ni.Suspect = true
		}
		v.nodes[m.ID] = ni
		v.since[m.ID], v.boot[m.ID] = m.Since, m.Boot
		if ni.Live && m.Replaces != "" {
			v.replaced[m.Replaces] = true
		}
	}
	return v
}

// down reports whether node id is not live, and lost whether its shards
// count as lost: dead for longer than the grace period, or replaced. A node
// gossip has never shown this worker counts as down, and as lost only once
// the worker has run for unknownGrace (and the grace): a placement naming
// it was written by servers that knew it, and right after start-up gossip
// may simply not have reached this worker yet, while a node that died
// before the cluster restarted never will.
func (w *Worker) status(v nodeView, id string) (down, lost bool) {
	ni, ok := v.nodes[id]
	if ok && ni.Live {
		return false, false
	}
	if v.replaced[id] {
		return true, true
	}
	if !ok {
		return true, w.now().Sub(w.started) >= max(w.cfg.Grace, unknownGrace)
	}
	return true, w.now().Sub(v.since[id]) >= w.cfg.Grace
}

// unknownGrace is how long a worker must have run before a placement node
// gossip never showed it counts as lost: several full gossip state
// exchanges (push-pull), even on a large or busy cluster.
const unknownGrace = 2 * time.Minute

// coordinator returns the first live server of a placement.
func coordinator(v nodeView, pl []string) string {
	for _, id := range pl {
		if v.nodes[id].Live {
			return id
		}
	}
	return ""
}

// eachManifest calls fn for every live manifest in the local store:
// erasure-coded objects and small objects stored inline in their
// manifest (no parts; their placement servers hold the manifest). The
// manifests come without their inline data, which no walk needs.
func (w *Worker) eachManifest(ctx context.Context, fn func(*metadata.Manifest) error) error {
	err := w.store.EachManifest(ctx, func(m *metadata.Manifest) error {
		if len(m.Placement) == 0 {
			return nil
		}
		return fn(m)
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("repair: walk manifests: %w", err)
	}
	return err
}

// scan walks the local manifests, counts the stripe groups this server
// coordinates and queues the repair of those with lost shards.
func (w *Worker) scan(ctx context.Context) error {
	v := w.view()
	w.noteReturns(v)
	sig := walkSignature(v)
	if !w.needWalk(sig) {
		w.hostPeers(ctx, v)
		return nil
	}
	t0 := w.now()
	live := 0
	for _, ni := range v.nodes {
		if ni.Live {
			live++
		}
	}
	if w.cfg.Rate > 0 && live > 0 {
		share := float64(w.cfg.Rate) / float64(live)
		w.limit.SetLimit(rate.Limit(share))
		w.limit.SetBurst(max(int(share), 1<<20))
	}
	var counts shardrpc.StripeCounts
	var found []*job
	unknown := map[string]bool{} // placement nodes gossip never showed this worker
	visit := func(m *metadata.Manifest, noncurrent bool) error {
		if coordinator(v, m.Placement) != v.self {
			return nil
		}
		parts := int64(max(len(m.Parts), 1)) // an inline object is one group
		counts.Total += parts
		if noncurrent {
			counts.Noncurrent += parts
		}
		var downs, lost []int
		for i, id := range m.Placement {
			d, l := w.status(v, id)
			if d {
				downs = append(downs, i)
				if _, known := v.nodes[id]; !known {
					unknown[id] = true
				}
			}
			if l {
				lost = append(lost, i)
			}
		}
		if len(downs) == 0 {
			// Fully redundant: only shards on draining servers may
			// need a new home.
			if moves := draining(v, m.Placement); len(moves) > 0 {
				j := &job{bucket: m.Bucket, key: m.Key, version: m.Version, lost: moves, move: true, noncurrent: noncurrent}
				counts.Draining += parts
				if w.isWaiting(j.ref()) {
					counts.DrainWaiting += parts
				}
				found = append(found, j)
			}
			return nil
		}
		counts.Degraded += parts
		counts.LostShards += parts * int64(len(downs))
		if len(lost) == 0 {
			counts.Pending += parts
		}
		if len(lost) > 0 && w.coalesce(v, m, downs, lost) {
			counts.Pending += parts // the rest of its failures turn lost soon
			return nil
		}
		if len(lost) > 0 {
			j := &job{bucket: m.Bucket, key: m.Key, version: m.Version, lost: lost, prio: len(downs), noncurrent: noncurrent}
			if w.isWaiting(j.ref()) {
				counts.Waiting += parts
			}
			found = append(found, j)
		}
		return nil
	}
	err := w.eachManifest(ctx, func(m *metadata.Manifest) error { return visit(m, false) })
	if err == nil {
		// NB: a versioned bucket's noncurrent versions keep their stripes
		// and are repaired (and moved off draining servers) alike, and
		// counted alike in the status.
		err = w.eachVersion(ctx, func(m *metadata.Manifest) error { return visit(m, true) })
	}
	if err != nil {
		return err
	}
	// Down servers, and when the first still within the grace turns lost.
	for id := range unknown {
		counts.DownSeen = append(counts.DownSeen, id)
	}
	for id, ni := range v.nodes {
		if !ni.Live || ni.Suspect {
			counts.DownSeen = append(counts.DownSeen, id)
		} else {
			counts.UpSeen = append(counts.UpSeen, id)
		}
		if ni.Live || v.replaced[id] {
			continue
		}
		if left := w.cfg.Grace - w.now().Sub(v.since[id]); left > 0 && counts.Pending > 0 {
			if s := left.Seconds(); counts.GraceLeft == 0 || s < counts.GraceLeft {
				counts.GraceLeft = s
			}
		}
	}
	slices.Sort(counts.DownSeen)
	slices.Sort(counts.UpSeen)
	counts.Scanned = w.now().UTC().Format(time.RFC3339Nano)
	w.mu.Lock()
	w.stripes = counts
	w.mu.Unlock()
	w.walked(t0, sig, counts.Degraded == 0 && counts.Draining == 0 && len(unknown) == 0 && len(found) == 0)
	w.m.stripes(counts)
	for _, j := range found {
		w.enqueue(j)
	}
	w.hostPeers(ctx, v)
	return nil
}

// coalesceWindow bounds how long a stripe group with lost shards waits
// for its other down servers to turn lost too (see coalesce).
const coalesceWindow = 30 * time.Second

// coalesce reports whether the group of m should wait before repairing
// lost: some of its other down servers are still inside the grace and turn
// lost within coalesceWindow. Servers that die together (a rack, a power
// cut, an operator's kill) are declared dead a few probe rounds apart;
// rebuilding them one at a time would move the group's data twice, where
// one concurrent repair (CORE, or one PULL decode for every lost shard)
// moves it once. A group left without redundancy does not wait.
func (w *Worker) coalesce(v nodeView, m *metadata.Manifest, downs, lost []int) bool {
	if len(downs) == len(lost) || len(m.Parts) == 0 {
		return false
	}
	if c, err := w.codes.Get(m.Code); err != nil || len(downs) >= c.ParityShards() {
		return false
	}
	isLost := map[int]bool{}
	for _, i := range lost {
		isLost[i] = true
	}
	window := min(coalesceWindow, w.cfg.Grace)
	for _, i := range downs {
		if isLost[i] {
			continue
		}
		since, ok := v.since[m.Placement[i]]
		if !ok || w.cfg.Grace-w.now().Sub(since) > window {
			return false
		}
	}
	return true
}

// draining returns the indexes of pl whose servers are live and draining:
// the shards a drain moves. (A draining server that died holds lost
// shards, which repair rebuilds like any other's.)
func draining(v nodeView, pl []string) []int {
	var out []int
	for i, id := range pl {
		if ni := v.nodes[id]; ni.Live && ni.Draining {
			out = append(out, i)
		}
	}
	return out
}

// nodeMark is what noteReturns compares between scans.
type nodeMark struct {
	live  bool
	since time.Time
	boot  int64
}

// noteReturns starts a manifest sync when a server came back: it (or
// this one, after a partition) may hold manifests the other missed. A
// server is back when it is live and, at the last scan, it was not, or
// it has gone down and up again since (its state changed), or it
// restarted (a new boot time), however quickly: a server restarted
// before anyone saw it die missed writes all the same.
//
// The returned server is asked to sync too: it may not know it was gone.
// A process paused (SIGSTOP, a long GC or VM stall) or starved of CPU
// past the grace is called dead by the others, who rebuild its shards
// elsewhere; from its own side nothing happened, so without being told
// it would keep its stale manifests and the shard files they name.
func (w *Worker) noteReturns(v nodeView) {
	w.mu.Lock()
	first := len(w.prevNodes) == 0
	var back []string // addresses of the servers back
	for id, ni := range v.nodes {
		mark := nodeMark{live: ni.Live, since: v.since[id], boot: v.boot[id]}
		if prev, ok := w.prevNodes[id]; ni.Live && !first && (!ok || !prev.live || !prev.since.Equal(mark.since) || prev.boot != mark.boot) {
			back = append(back, ni.Addr)
		}
		w.prevNodes[id] = mark
	}
	for id := range w.prevNodes {
		if _, ok := v.nodes[id]; !ok {
			delete(w.prevNodes, id)
		}
	}
	w.mu.Unlock()
	if len(back) == 0 {
		return
	}
	w.kickSync()
	if r, ok := w.shards.(syncRequester); ok {
		for _, addr := range back {
			if addr == "" || addr == v.nodes[v.self].Addr {
				continue
			}
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := r.RequestSync(ctx, addr); err != nil {
					w.log.Debug("ask a returned server to sync", "addr", addr, "err", err)
				}
			}()
		}
	}
}

// syncRequester asks a peer to sync its manifests (*shardrpc.Client has
// it).
type syncRequester interface {
	RequestSync(ctx context.Context, addr string) error
}

func (w *Worker) isWaiting(ref string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting[ref]
}

// enqueue adds j unless its object is already queued or running.
func (w *Worker) enqueue(j *job) bool {
	w.mu.Lock()
	busy := w.inflight[j.ref()]
	w.mu.Unlock()
	if busy {
		return false
	}
	if j.predicted == 0 {
		j.cost = w.estimate(j)
		j.predicted = j.cost.Seconds
	}
	share := w.share(w.view())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inflight[j.ref()] {
		return false
	}
	w.inflight[j.ref()] = true
	w.queue.push(j, w.now())
	w.counts.Queued++
	if w.batch == nil {
		w.batchT0 = w.now()
		w.batch = &shardrpc.RepairBatch{Start: w.batchT0.UTC().Format(time.RFC3339Nano)}
	}
	w.batch.Jobs++
	w.lastShare = share
	w.batchCosts = append(w.batchCosts, j.cost)
	w.batch.CPU += j.cost.CPU
	// NB: predicted when read (predictBatch), not per enqueue: the
	// model walks every job of the batch.
	w.batchStale = true
	w.m.queued.Set(float64(w.counts.Queued))
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// pop takes the most endangered ready job.
func (w *Worker) pop() *job {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.queue.pop(w.now())
	if j == nil {
		return nil
	}
	w.counts.Queued--
	w.counts.Running++
	w.m.queued.Set(float64(w.counts.Queued))
	w.m.running.Set(float64(w.counts.Running))
	return j
}

func (w *Worker) runJobs(ctx context.Context) {
	for ctx.Err() == nil {
		j := w.pop()
		if j == nil {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		w.runJob(ctx, j)
	}
}

// shunFor is how long a node a failed task blamed is left out of plans.
// Gossip needs a few probe rounds to declare a killed server dead; in the
// meantime every retry planned with it as helper or destination would fail
// again. Long enough to cover that, short enough that a node blamed for a
// passing hiccup is soon used again.
const shunFor = 15 * time.Second

// blamed notes the node err blames (an *ExecError naming one) as one to
// avoid; w.mu is held.
func (w *Worker) blamed(err error) {
	var xe *ExecError
	if errors.As(err, &xe) && xe.Node != "" && xe.Node != w.cfg.NodeID {
		w.shunned[xe.Node] = w.now().Add(shunFor)
	}
}

// errRetryLater marks job outcomes that are neither done nor failed: the
// object changed, or no server can take its shards yet.
var errRetryLater = errors.New("repair: retry at the next scan")

func (w *Worker) runJob(ctx context.Context, j *job) {
	t0 := w.now()
	res, err := w.repair(ctx, j)
	secs := w.now().Sub(t0).Seconds()
	if errors.Is(err, ErrSuperseded) && !j.noncurrent {
		if _, serr := w.syncKey(ctx, j.bucket, j.key); serr != nil && ctx.Err() == nil {
			w.log.Warn("manifest sync after a fenced repair", "object", j.ref(), "err", serr)
		}
	}
	w.mu.Lock()
	w.counts.Running--
	w.m.running.Set(float64(w.counts.Running))
	// Whatever the outcome, the next scan walks: a repaired group is
	// checked once more, and a failed or deferred one is found again.
	w.walkDirty.Store(true)
	requeue := false
	switch {
	case err == nil:
		w.counts.Done++
		if j.inPlace {
			w.counts.InPlace++
		}
		w.counts.BytesMoved += res.BytesMoved
		w.counts.ByMethod[string(res.Method)]++
		delete(w.waiting, j.ref())
		if w.batch != nil {
			w.batch.Bytes += res.BytesMoved
		}
		w.m.done(res)
	case errors.Is(err, errRetryLater) || errors.Is(err, ErrSuperseded) || ctx.Err() != nil:
		// The object changed (or its repair moved on): the next scan
		// looks at it afresh, with its new manifest.
	case j.attempt < w.cfg.Retries:
		w.blamed(err)
		j.attempt++
		j.notBefore = w.now().Add(w.cfg.Backoff << (j.attempt - 1))
		requeue = true
	default:
		w.counts.Failed++
		w.m.failed.Inc()
	}
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, errRetryLater):
		// Expected (waiting for capacity, the object changed): the next
		// scan takes it up again.
		w.log.Debug("repair deferred", "object", j.ref(), "err", err)
	default:
		w.log.Warn("repair failed", "object", j.ref(), "attempt", j.attempt, "requeued", requeue, "err", err)
	}
	ev := shardrpc.RepairEvent{Object: j.ref(), Method: string(res.Method), Lost: j.lost, Predicted: j.predicted, Seconds: secs, Bytes: res.BytesMoved}
	if err != nil {
		ev.Err = err.Error()
	}
	w.recent = append(w.recent, ev)
	if len(w.recent) > 20 {
		w.recent = w.recent[len(w.recent)-20:]
	}
	if requeue {
		w.queue.push(j, w.now())
		w.counts.Queued++
	} else {
		delete(w.inflight, j.ref())
	}
	if w.queue.len() == 0 && w.counts.Running == 0 && w.batch != nil {
		w.predictBatch()
		w.batch.Elapsed = w.now().Sub(w.batchT0).Seconds()
		w.last, w.batch, w.batchCosts, w.peerCPU = w.batch, nil, nil, nil
		w.log.Info("repair batch finished", "jobs", w.last.Jobs, "seconds", w.last.Elapsed, "predicted", w.last.Predicted, "bytes", w.last.Bytes)
	}
	w.mu.Unlock()
}

// estimate predicts a job's cost with the planner: its parts run one
// after the other, and the manifest switch adds an fsync on each
// placement server.
func (w *Worker) estimate(j *job) Cost {
	m, err := w.manifestOf(context.Background(), j)
	if err != nil {
		return Cost{}
	}
	v := w.view()
	var total Cost
	for _, p := range m.Parts {
		d, err := w.planner(j)(v, m, p, j.lost, nil)
		if err != nil {
			return Cost{}
		}
		total = total.Add(d.Cost)
	}
	if !j.inPlace {
		total.Fsyncs += float64(len(m.Placement))
	}
	if len(m.Parts) == 0 {
		total.Seconds = w.model().Setup.Seconds() // an inline object: one manifest switch
	}
	return total
}

// share is the fraction of its host's cores and disk this worker's
// repairs get: every live shard server on the same host repairs at the
// same time (each coordinates about as many stripe groups).
func (w *Worker) share(v nodeView) float64 {
	self, ok := v.nodes[v.self]
	if !ok {
		return 1
	}
	host := hostOf(self)
	same := 0
	for _, ni := range v.nodes {
		if ni.Live && hostOf(ni) == host {
			same++
		}
	}
	return 1 / float64(max(same, 1))
}

// hostOf names the machine a node runs on: the one it advertises, else
// its address's host.
func hostOf(ni NodeInfo) string {
	if ni.Machine != "" {
		return "machine:" + ni.Machine
	}
	if h, _, err := net.SplitHostPort(ni.Addr); err == nil {
		return h
	}
	return ni.Addr
}

// statusGetter reads a peer's repair status (*shardrpc.Client has it).
type statusGetter interface {
	RepairStatus(ctx context.Context, addr string) (shardrpc.RepairStatus, error)
}

// hostPeers, while a batch runs, asks the other live shard servers of
// this host how much repair CPU their batches hold, and predicts the
// batch again with them (Batch's processor sharing). A server that alone
// on its host asks nobody. Each peer's largest figure during the batch is
// kept, so a peer finishing early does not shorten the prediction: it is
// revised for work the host was given, never for progress made.
func (w *Worker) hostPeers(ctx context.Context, v nodeView) {
	w.mu.Lock()
	open, t0 := w.batch != nil, w.batchT0
	w.mu.Unlock()
	sg, ok := w.shards.(statusGetter)
	if !open || !ok {
		return
	}
	host := hostOf(v.nodes[v.self])
	var mu sync.Mutex
	got := map[string]float64{}
	var g errgroup.Group
	for id, ni := range v.nodes {
		if id == v.self || !ni.Live || hostOf(ni) != host {
			continue
		}
		g.Go(func() error {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			st, err := sg.RepairStatus(cctx, ni.Addr)
			if err != nil {
				return nil
			}
			cpu := 0.0
			if st.Batch != nil {
				cpu = st.Batch.CPU
			} else if b := st.Last; b != nil && overlaps(b, t0) {
				cpu = b.CPU // done already, but it ran beside this batch
			}
			mu.Lock()
			got[id] = cpu
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	if len(got) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.batch == nil {
		return
	}
	if w.peerCPU == nil {
		w.peerCPU = map[string]float64{}
	}
	for id, c := range got {
		w.peerCPU[id] = max(w.peerCPU[id], c)
	}
	w.batchStale = true
}

// predictBatch brings the open batch's prediction up to date with the
// jobs queued and the peers' CPU reported since it was last made; w.mu is
// held.
func (w *Worker) predictBatch() {
	if w.batch == nil || !w.batchStale {
		return
	}
	w.batch.Predicted = w.model().Batch(w.batchCosts, w.cfg.Workers, w.lastShare, w.peerList())
	w.batchStale = false
}

// peerList returns the host peers' batch CPU for Batch (nil: unknown, so
// Batch assumes equal shares); w.mu is held.
func (w *Worker) peerList() []float64 {
	if w.peerCPU == nil {
		return nil
	}
	out := make([]float64, 0, len(w.peerCPU))
	for _, c := range w.peerCPU {
		out = append(out, c)
	}
	return out
}

// overlaps reports whether the finished batch b ended after t0.
func overlaps(b *shardrpc.RepairBatch, t0 time.Time) bool {
	start, err := time.Parse(time.RFC3339Nano, b.Start)
	return err == nil && start.Add(time.Duration(b.Elapsed*float64(time.Second))).After(t0)
}
