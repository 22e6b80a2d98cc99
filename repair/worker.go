package repair

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
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
		SyncInterval:     5 * time.Minute, // a missed write the MRF queue did not heal is whole again within 5-10 minutes (many: periodicRanges ranges per peer and pass)
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

// Worker repairs the stripe groups this server coordinates: it runs the
// jobs of its queue (plans them, rebuilds the lost shards, switches the
// manifests) and starts the services that feed it and keep its model, each
// a type that owns its state and its lock. Their locks are leaves: a
// service holds its lock over its own state only, never while it calls
// the worker or another service, so no order between locks needs keeping.
//
//   - scheduler (scheduler.go): the queue, the running jobs, the batch;
//   - scanner (scanner.go): finds degraded and draining groups;
//   - syncer (worker_sync.go, antientropy.go): manifest anti-entropy;
//   - mrfHealer (mrf.go): heals writes that missed a server;
//   - scrubber (scrub.go): verifies this server's shards;
//   - calibrator (calibrator.go): keeps the cost model measured.
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
	calibrate bool
	limit     *rate.Limiter
	m         *metrics
	// codes: every code met by name, built once (a Clay code's repair
	// plans are cached inside it, per failure set).
	codes codec.Cache

	// mu guards what the planner learns about the nodes while jobs run:
	// the transfers running on each, their measured rates, the nodes
	// failed tasks blamed.
	mu    sync.Mutex
	load  map[string]int // node -> running task involvement
	rates map[string]Rates
	// shunned: nodes a failed task blamed, until when the planner treats
	// them as suspect (see blamed).
	shunned map[string]time.Time

	// The services. cal owns the live cost model: cfg.Model is only the
	// one it starts from.
	sched   *scheduler
	scanner *scanner
	syncer  *syncer
	mrf     *mrfHealer
	scrub   *scrubber
	cal     *calibrator
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
	// inline: the object is stored inside its manifest, as the scan saw
	// it: its repair is a manifest switch alone, which runs in batches
	// (switch_batch.go).
	inline bool
	// width is the placement's length as the scan saw it (0: unknown),
	// so that an inline job's estimate needs no manifest read.
	width int
	// parts is the object's stripe groups as the scan counted them.
	parts int
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
		exec: opt.Executor, allowed: opt.Methods, calibrate: opt.CalibratePath,
		now: time.Now, load: map[string]int{}, rates: map[string]Rates{}, shunned: map[string]time.Time{},
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
	// The services get the worker's view of the membership and its clock
	// (read at each call: tests set w.now), and queue into its jobs.
	now := func() time.Time { return w.now() }
	w.sched = newScheduler(cfg, now, m)
	w.syncer = &syncer{self: cfg.NodeID, interval: cfg.SyncInterval, log: log, store: store, shards: shards, m: m,
		view: w.view, now: now, rebuild: w.enqueue, codes: &w.codes, settle: 2 * time.Second, recheck: time.Second, periodicEntries: periodicEntries, kickc: make(chan struct{}, 1),
		busy: func() bool { return !w.idle() }}
	w.mrf = &mrfHealer{self: cfg.NodeID, log: log, store: store, shards: shards, view: w.view, now: now,
		keys: w.syncer, events: opt.Events, live: map[string]bool{}, boot: map[string]int64{},
		missed: map[string]map[mrfRef]*mrfNote{}, wake: make(chan struct{}, 1)}
	w.scanner = &scanner{interval: cfg.ScanInterval, fullEvery: cfg.FullScanInterval, grace: cfg.Grace,
		log: log, store: store, shards: shards, m: m, codes: &w.codes, view: w.view, now: now, loss: w.status,
		jobs: w, sync: w.syncer, prevNodes: map[string]nodeMark{}, wake: make(chan struct{}, 1)}
	w.scrub = &scrubber{self: cfg.NodeID, rate: cfg.ScrubRate, every: cfg.ScrubInterval,
		log: log, store: store, shards: shards, m: m, view: w.view, lookup: w.manifestOf, rebuild: w.enqueue}
	w.cal = &calibrator{self: cfg.NodeID, log: log, shards: shards, view: w.view, dir: opt.CalibrateDir,
		dataPathBytes: opt.DataPathBytes, writtenBytes: opt.WrittenBytes, repairing: func() bool { return !w.sched.idle() }, cm: cfg.Model}
	return w, nil
}

// Run starts the services and the job runners and scans until ctx ends;
// it returns once they have all stopped.
func (w *Worker) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	// NB: before calibration, which takes seconds: a server that returns
	// meanwhile is healed at once.
	wg.Go(func() { w.mrf.run(ctx) })
	if w.calibrate {
		w.cal.calibratePath(ctx)
	}
	for range w.cfg.Workers {
		wg.Go(func() { w.runJobs(ctx) })
	}
	wg.Go(func() { w.syncer.run(ctx) })
	wg.Go(func() { w.cal.run(ctx) })
	if w.cfg.ScrubRate > 0 {
		wg.Go(func() { w.scrub.run(ctx) })
	}
	w.syncer.kick()
	w.scanner.run(ctx)
	wg.Wait()
	return nil
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

// idle reports whether no repair job is queued or running (scanJobs).
func (w *Worker) idle() bool { return w.sched.idle() }

// isWaiting reports whether the job ref names waits for a server to
// rebuild onto (scanJobs).
func (w *Worker) isWaiting(ref string) bool { return w.sched.isWaiting(ref) }

// holdEnded and releaseEnded implement scanJobs.
func (w *Worker) holdEnded()    { w.sched.holdEnded() }
func (w *Worker) releaseEnded() { w.sched.releaseEnded() }

// scanning takes this server's share of the cluster's repair rate
// (Config.Rate) from the live servers of the view a scan starts with
// (scanJobs).
func (w *Worker) scanning(v nodeView) {
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
}

// scanned revises the open batch's prediction with the host peers'
// after each scan (scanJobs).
func (w *Worker) scanned(ctx context.Context, v nodeView) { w.hostPeers(ctx, v) }

// enqueue estimates j and queues it unless its object is already queued
// or running.
func (w *Worker) enqueue(j *job) bool {
	if w.sched.busy(j.ref()) {
		return false // NB: before estimating, which plans every part
	}
	if j.predicted == 0 {
		j.cost = w.estimate(j)
		j.predicted = j.cost.Seconds
	}
	return w.sched.add(j, w.share(w.view()))
}

func (w *Worker) runJobs(ctx context.Context) {
	for ctx.Err() == nil {
		js := w.sched.popBatch(inlineBatch, w.batchable)
		switch {
		case len(js) == 0:
			select {
			case <-ctx.Done():
				return
			case <-w.sched.wake:
			case <-time.After(w.sched.idleWait()):
			}
		case len(js) == 1:
			w.runJob(ctx, js[0])
		default:
			w.runBatch(ctx, js)
		}
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

// errNotDegraded marks a job whose group is found not degraded any more
// when it runs (repaired since the walk that queued it, or deleted): a
// retry-later outcome that also takes the group off the walk's counts, as
// a repair would. A walk that overlaps a repair counts groups whose jobs
// end before it is over; their jobs, queued again, end this way, and
// without it the status kept counting them degraded until the walk after
// the queue drained (6,784 groups for 50 s at the end of a
// quarter-million-object repair).
var errNotDegraded = fmt.Errorf("%w (not degraded)", errRetryLater)

func (w *Worker) runJob(ctx context.Context, j *job) {
	t0 := w.now()
	res, err := w.repair(ctx, j)
	w.ended(ctx, j, res, err, w.now().Sub(t0).Seconds())
}

// runBatch repairs the inline objects of js (batchable, one bucket) with
// their switches batched (switchBatch); each job ends with its own
// outcome.
func (w *Worker) runBatch(ctx context.Context, js []*job) {
	t0 := w.now()
	v := w.view()
	var ops []*switchOp
	var opJobs []*job
	var results []Result
	for _, j := range js {
		m, lost, err := w.prepare(ctx, v, j)
		if err == nil && len(m.Parts) > 0 {
			// NB: not inline after all (the scan saw another manifest
			// than the one of j.version): repaired alone.
			w.runJob(ctx, j)
			continue
		}
		var res Result
		var op *switchOp
		if err == nil {
			res, err = w.planInline(v, m, lost, j)
		}
		if err == nil {
			op, err = w.newSwitch(v, m, res.Rebuilt, j.noncurrent)
		}
		if err != nil {
			w.ended(ctx, j, Result{}, err, 0)
			continue
		}
		if w.log.Enabled(ctx, slog.LevelDebug) { // NB: a line per object costs more than its share of the calls
			w.log.Debug("repair plan", "object", j.ref(), "method", Inline, "lost", lost, "dest", destIDs(res.Rebuilt))
		}
		ops, opJobs, results = append(ops, op), append(opJobs, j), append(results, res)
	}
	if len(ops) == 0 {
		return
	}
	w.log.Info("repair batch of inline switches", "bucket", js[0].bucket, "jobs", len(ops))
	errs := w.switchBatch(ctx, w.shards.(batchShards), v, js[0].bucket, ops)
	// NB: each job's share of the batch's time.
	secs := w.now().Sub(t0).Seconds() / float64(len(ops))
	for i, j := range opJobs {
		w.ended(ctx, j, results[i], errs[i], secs)
	}
}

// ended records the outcome of j, run for secs seconds: the scheduler's
// counts and retry, a sync of an object found changed, a log line.
func (w *Worker) ended(ctx context.Context, j *job, res Result, err error, secs float64) {
	if errors.Is(err, ErrSuperseded) && !j.noncurrent {
		if _, serr := w.syncer.syncKey(ctx, j.bucket, j.key); serr != nil && ctx.Err() == nil {
			w.log.Warn("manifest sync after a fenced repair", "object", j.ref(), "err", serr)
		}
	}
	// A failed or deferred job is found again by the next scan, which
	// walks. A repaired group comes off the walk's counts; it is checked
	// once more by the walk that follows the queue's draining. A group
	// rebuilt onto a server that has died since its shard was written
	// (the switch needs only a quorum) is still degraded: it stays in the
	// counts and the next scan walks for it. Taken off, the status read
	// nothing degraded and nothing queued until that walk, while an
	// object still had a shard on the dead server.
	switch {
	case err != nil && !errors.Is(err, errNotDegraded):
		w.scanner.markDirty(walkJob)
	case err == nil && rebuiltOntoDown(w.view(), res):
		w.scanner.markDirty(walkJob)
	default:
		w.scanner.repaired(j)
		w.sched.keepEnded(j.ref())
	}
	retry := w.sched.retry(ctx, j, err)
	if retry {
		w.mu.Lock()
		w.blamed(err)
		w.mu.Unlock()
	}
	requeue, ended := w.sched.finish(ctx, j, res, err, secs, w.cal.model())
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, errRetryLater):
		// Expected (waiting for capacity, the object changed): the next
		// scan takes it up again.
		w.log.Debug("repair deferred", "object", j.ref(), "err", err)
	default:
		w.log.Warn("repair failed", "object", j.ref(), "attempt", j.attempt, "requeued", requeue, "err", err)
	}
	if w.sched.idle() {
		w.scanner.drained()
	}
	if ended != nil {
		w.log.Info("repair batch finished", "jobs", ended.Jobs, "seconds", ended.Elapsed, "predicted", ended.Predicted, "bytes", ended.Bytes)
	}
}

// rebuiltOntoDown reports whether a shard of res was rebuilt onto a
// server that is not live in v.
func rebuiltOntoDown(v nodeView, res Result) bool {
	for _, n := range res.Rebuilt {
		if !v.nodes[n.ID].Live {
			return true
		}
	}
	return false
}

// estimate predicts a job's cost with the planner: its parts run one
// after the other, and the manifest switch adds an fsync on each
// placement server.
func (w *Worker) estimate(j *job) Cost {
	if j.inline && j.width > 0 {
		// NB: one manifest switch, whatever the manifest says; reading it
		// again here made the scan's enqueues a quarter of a shard
		// server's CPU (perf) while a dead server's 750,000 groups of a
		// million-object cluster were queued.
		c := Cost{Seconds: w.cal.model().Setup.Seconds()}
		if !j.inPlace {
			c.Fsyncs = float64(j.width)
		}
		return c
	}
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
		total.Seconds = w.cal.model().Setup.Seconds() // an inline object: one manifest switch
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
	t0, open := w.sched.openBatch()
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
	if len(got) > 0 {
		w.sched.notePeers(got)
	}
}

// overlaps reports whether the finished batch b ended after t0.
func overlaps(b *shardrpc.RepairBatch, t0 time.Time) bool {
	start, err := time.Parse(time.RFC3339Nano, b.Start)
	return err == nil && start.Add(time.Duration(b.Elapsed*float64(time.Second))).After(t0)
}
