package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/netlimit"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
	"github.com/regen-s3/regen/repair"
	"github.com/regen-s3/regen/shardserver"
)

// shardFlags are the options of `regen shard`.
type shardFlags struct {
	data, listen, gossip, advertise, advertiseHTTP string
	join                                           listFlag
	secret, zone, replaces                         string
	logOptions
	uploadMaxAge, uploadSweep time.Duration
	gcDelay, rollbackAfter    time.Duration
	tombstoneGrace            time.Duration
	tombstoneSettle           time.Duration
	repair                    repairFlags
	netLimit                  int64
	metaCache                 int64
	memoryLimit               int64
	limits                    limitFlags
	shardTLS                  shardTLSFlags
}

// shardMemoryLimit is --memory-limit's default for a shard server. Its
// Go heap holds about 100 MiB live while a dead server's groups are
// repaired at a million objects (the queued jobs, the pebble block cache
// and memtables when built without cgo, as the image is); without a limit
// the heap grew to twice that before each collection (GOGC=100) and a
// server of a million-object dev cluster passed 400 MiB RSS.
const shardMemoryLimit = 192 << 20

// shardLimitDefaults are the shard listener's defaults (shardserver.Limits).
func shardLimitDefaults() limitFlags {
	d := shardserver.DefaultLimits()
	return limitFlags{readHeader: d.ReadHeaderTimeout, read: d.ReadTimeout, write: d.WriteTimeout, idle: d.IdleTimeout,
		maxConns: d.MaxConns, maxConnsPerIP: d.MaxConnsPerIP, maxHeader: int64(d.MaxHeaderBytes)}
}

// serverLimits turns the options into shardserver.Limits.
func (f *shardFlags) serverLimits() shardserver.Limits {
	return shardserver.Limits{
		ReadHeaderTimeout: f.limits.readHeader, ReadTimeout: f.limits.read, WriteTimeout: f.limits.write, IdleTimeout: f.limits.idle,
		MaxConns: f.limits.maxConns, MaxConnsPerIP: f.limits.maxConnsPerIP, MaxHeaderBytes: int(f.limits.maxHeader),
	}
}

func (f *shardFlags) register(o *optionSet) {
	o.String(&f.data, "data", "REGEN_DATA", "./data/shard", "data directory: shard files, pebble DB, node ID")
	o.String(&f.listen, "listen", "REGEN_LISTEN", "127.0.0.1:9100", "shard API listen address host:port")
	o.String(&f.advertiseHTTP, "advertise-http", "REGEN_ADVERTISE_HTTP", "", "shard API address told to peers, if different")
	o.String(&f.gossip, "gossip", "REGEN_GOSSIP", "127.0.0.1:7947", "gossip listen address host:port")
	o.String(&f.advertise, "advertise", "REGEN_ADVERTISE", "", "gossip address told to peers, if different")
	o.List(&f.join, "join", "REGEN_JOIN", nil, "gossip address of a cluster member, repeatable (the variable: comma-separated)")
	o.String(&f.secret, "secret", "REGEN_CLUSTER_SECRET", "", "cluster secret shared by all nodes (required)")
	o.String(&f.zone, "zone", "REGEN_ZONE", "", "failure zone of this server")
	o.String(&f.replaces, "replaces", "REGEN_REPLACES", "", "node ID of a dead server this new one replaces")
	f.logOptions.register(o, "lan")
	f.repair.register(o, repair.DefaultConfig())
	f.limits.register(o, shardLimitDefaults())
	f.shardTLS.register(o)
	o.Rate(&f.netLimit, "net-limit", "REGEN_NET_LIMIT", 0, "cap shard traffic per direction, e.g. 125MB for 1 Gb/s; emulates a NIC (not switch incast) when many servers share one machine; 0 = unlimited")
	def := shardserver.DefaultConfig()
	o.Duration(&f.uploadMaxAge, "upload-max-age", "REGEN_UPLOAD_MAX_AGE", def.UploadMaxAge, "abort incomplete multipart uploads older than this")
	f.registerGC(o)
	o.Size(&f.metaCache, "meta-cache", "REGEN_META_CACHE", def.MetaCache, "block cache of the metadata store (manifests), e.g. 64MiB")
	o.Size(&f.memoryLimit, "memory-limit", "REGEN_MEMORY_LIMIT", shardMemoryLimit, "soft limit of the shard server process's Go memory (runtime/debug.SetMemoryLimit): garbage is collected before the heap passes it; 0 = none; GOMEMLIMIT, if set, wins")
	o.Duration(&f.uploadSweep, "upload-sweep-interval", "REGEN_UPLOAD_SWEEP_INTERVAL", def.UploadSweepInterval, "how often abandoned multipart uploads are looked for")
}

// registerGC declares the options regen dev passes on to its shard servers.
func (f *shardFlags) registerGC(o *optionSet) {
	def := shardserver.DefaultConfig()
	o.Duration(&f.gcDelay, "gc-delay", "REGEN_GC_DELAY", def.GCDelay, "how long after a replacement its confirm job runs; a replaced version's shards go only once the replacement is confirmed")
	o.Duration(&f.rollbackAfter, "rollback-after", "REGEN_ROLLBACK_AFTER", def.RollbackAfter, "roll back a replacing manifest that provably never reached a write quorum after this long; must outlast the slowest PUT")
	o.Duration(&f.tombstoneGrace, "tombstone-grace", "REGEN_TOMBSTONE_GRACE", def.TombstoneGrace, "collect a delete's tombstone no sooner than this after it was stored, once every shard server holds it or nothing; must outlast any write in flight")
	o.Duration(&f.tombstoneSettle, "tombstone-settle", "REGEN_TOMBSTONE_SETTLE", def.TombstoneSettle, "check tombstones with the peers no sooner than this after start, once gossip has shown every shard server; must outlast the first gossip exchanges")
}

// validateGC checks what registerGC declared.
func (f *shardFlags) validateGC() error {
	if f.gcDelay < 0 {
		return badOption("gc-delay", "must not be negative")
	}
	if f.rollbackAfter <= 0 {
		return badOption("rollback-after", "must be positive")
	}
	if f.tombstoneGrace < shardserver.MinTombstoneGrace {
		return badOption("tombstone-grace", "want at least %s", shardserver.MinTombstoneGrace)
	}
	if f.tombstoneSettle < 0 {
		return badOption("tombstone-settle", "must not be negative")
	}
	return nil
}

// Validate checks the shard server's options.
func (f *shardFlags) Validate() error {
	if err := checkClusterSecret(f.secret); err != nil {
		return err
	}
	if f.data == "" {
		return badOption("data", "must not be empty")
	}
	for _, c := range []struct{ name, v string }{{"listen", f.listen}, {"gossip", f.gossip}} {
		if err := checkHostPort(c.name, c.v); err != nil {
			return err
		}
	}
	if f.advertise != "" {
		if err := checkHostPort("advertise", f.advertise); err != nil {
			return err
		}
	}
	if err := f.logOptions.Validate(); err != nil {
		return err
	}
	if err := f.repair.Validate(); err != nil {
		return err
	}
	if f.memoryLimit < 0 {
		return badOption("memory-limit", "must not be negative")
	}
	if err := f.validateGC(); err != nil {
		return err
	}
	if f.uploadMaxAge < time.Second {
		return badOption("upload-max-age", "want at least 1s")
	}
	if f.uploadSweep <= 0 {
		return badOption("upload-sweep-interval", "must be positive")
	}
	if err := f.limits.Validate(); err != nil {
		return err
	}
	if err := f.serverLimits().Validate(); err != nil {
		return usageError{err}
	}
	if f.shardTLS.enabled() && f.shardTLS.cert == "" {
		return badOption("shard-tls-cert", "a shard server serving TLS needs its own --shard-tls-cert and --shard-tls-key")
	}
	return f.shardTLS.Validate()
}

func runShard(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("shard", "Run a shard server: it stores shards and manifests and repairs what dead servers held.")
	var f shardFlags
	f.register(o)
	if err := o.Parse(args, f.Validate); err != nil {
		return err
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	limits := f.serverLimits()
	serverTLS, err := f.shardTLS.serverConfig()
	if err != nil {
		return err
	}
	clientTLS, err := f.shardTLS.clientConfig()
	if err != nil {
		return err
	}
	if err := privateDir(f.data); err != nil {
		return err
	}
	// NB: made before the listener opens: it refuses requests signed
	// before it existed, and the kernel queues connections from the
	// moment the port listens (peers learn of this server by gossip and
	// call it while it is still calibrating).
	verifier := shardrpc.NewVerifier(f.secret, shardrpc.VerifierOptions{Logger: log})
	id, err := shardserver.LoadOrCreateNodeID(f.data)
	if err != nil {
		return err
	}
	log = log.With("node", id)
	if f.tombstoneGrace < f.rollbackAfter {
		// NB: allowed (tests and chaos runs collect within seconds), but
		// --rollback-after is what the cluster assumes the slowest PUT
		// takes, and a grace shorter than a write can live lets a late
		// write of a deleted object land where nothing refuses it.
		log.Warn("--tombstone-grace is shorter than --rollback-after: a write still in flight could bring a deleted object back",
			"tombstone_grace", f.tombstoneGrace, "rollback_after", f.rollbackAfter)
	}
	if err := servePprof(ctx, f.pprof, log); err != nil {
		return err
	}
	setMemoryLimit(f.memoryLimit)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "regen_shard_rpc_body_waits_total",
			Help: "Signed RPC requests that waited for the server's request-body budget."},
			func() float64 { return float64(verifier.BodyStats().Waited) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "regen_shard_rpc_body_refused_total",
			Help: "Signed RPC requests refused with 503 after waiting for the request-body budget (clients retry them)."},
			func() float64 { return float64(verifier.BodyStats().Refused) }))

	cfg := shardserver.DefaultConfig()
	cfg.DataDir, cfg.Secret, cfg.NodeID = f.data, f.secret, id
	cfg.Logger, cfg.Registerer = log, reg
	cfg.UploadMaxAge, cfg.UploadSweepInterval = f.uploadMaxAge, f.uploadSweep
	cfg.GCDelay, cfg.RollbackAfter, cfg.TombstoneGrace = f.gcDelay, f.rollbackAfter, f.tombstoneGrace
	cfg.TombstoneSettle, cfg.MetaCache = f.tombstoneSettle, f.metaCache
	// NB: the repair worker is made after the server; writes stored
	// before it exists are covered by its full sync at start.
	var mrf atomic.Pointer[repair.Worker]
	cfg.OnStored = func(m *metadata.Manifest) {
		if w := mrf.Load(); w != nil {
			w.NoteWrite(m)
		}
	}
	cfg.OnInStep = func(peer string) {
		if w := mrf.Load(); w != nil {
			w.NotePeerInStep(peer)
		}
	}
	// NB: confirm jobs run from srv.Run, which starts after node is set.
	var node *cluster.Node
	cfg.Peers = func(id string) (string, bool) {
		if node == nil {
			return "", false
		}
		m, ok := node.Member(id)
		if !ok || !m.Alive() || m.HTTP == "" {
			return "", false
		}
		return m.HTTP, true
	}
	// NB: every shard server gossip has shown this process, dead ones
	// included, but not one a live server was started to replace
	// (--replaces): the operator has declared it gone for good.
	cfg.Members = func() []string {
		if node == nil {
			return nil
		}
		all := node.Members()
		replaced := map[string]bool{}
		for _, m := range all {
			if m.Alive() && m.Replaces != "" {
				replaced[m.Replaces] = true
			}
		}
		var ids []string
		for _, m := range all {
			if m.Role == cluster.RoleShard && m.HTTP != "" && !(replaced[m.ID] && !m.Alive()) {
				ids = append(ids, m.ID)
			}
		}
		return ids
	}
	// The drain flag survives restarts: it lives in the data dir and is
	// advertised again at start.
	draining, err := shardserver.LoadDraining(f.data)
	if err != nil {
		return err
	}
	var meta cluster.Meta // what node advertises; OnDrain changes its flag
	cfg.OnDrain = func(d bool) error {
		if node == nil {
			return errors.New("gossip has not started yet")
		}
		meta.Draining = d
		return node.UpdateMeta(meta)
	}
	// NB: one limiter for the listener and the peer dialer: the cap is the
	// server's, like a NIC's, whichever side opened the connection.
	limiter := netlimit.New(f.netLimit)
	cfg.RepairHTTP = shardrpc.WithTLS(shardrpc.NewRepairHTTPClient(limiter.Dialer((&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext)), clientTLS)
	cfg.PeerHTTP = shardrpc.WithTLS(nil, clientTLS)
	srv, err := shardserver.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("cannot listen for the shard API on %s: %w", f.listen, err)
	}
	httpAddr := advertisedHTTP(ln.Addr().String(), f.advertiseHTTP)
	host, port, err := splitHostPort("gossip", f.gossip)
	if err != nil {
		return err
	}
	ccfg := cluster.Config{
		NodeID: id, BindAddr: host, BindPort: port, Join: f.join, Secret: f.secret, Profile: f.profile, Logger: log,
	}
	meta = cluster.Meta{Role: cluster.RoleShard, HTTP: httpAddr, Zone: f.zone, Replaces: f.replaces, Capacity: diskCapacity(f.data), Draining: draining, Boot: time.Now().UnixNano(), Machine: machineID()}
	ccfg.Meta = meta
	if f.advertise != "" {
		if ccfg.AdvertiseAddr, ccfg.AdvertisePort, err = splitHostPort("advertise", f.advertise); err != nil {
			return err
		}
	}
	node, err = cluster.Start(ctx, ccfg)
	if err != nil {
		return err
	}
	reg.MustRegister(node.Collector())

	worker, err := f.repair.worker(id, f.data, log, reg, srv, node, f.secret, clientTLS)
	if err != nil {
		return err
	}
	mrf.Store(worker)
	mux := http.NewServeMux()
	mux.Handle(shardrpc.PathMetrics, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle(shardrpc.PathRepairStatus, worker.Handler())
	mux.Handle(shardrpc.PathRepairSync, worker.SyncHandler())
	mux.Handle("/", srv.Handler())
	// NB: the whole mux is behind the signature check (its public paths:
	// health, readiness, metrics) and panic recovery, so every endpoint
	// mounted here, now or later, is covered without code of its own.
	hs := limits.HTTPServer(shardrpc.Recover(log, verifier.Middleware(mux)), log)
	var sln net.Listener = limiter.Listener(ln)
	if serverTLS != nil {
		sln = tls.NewListener(sln, serverTLS)
	}
	if sln, err = limits.Listener(sln, log.With("component", "listener")); err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(sln) }()
	go func() { errc <- srv.Run(ctx) }()
	go func() { errc <- worker.Run(ctx) }()
	log.Info("shard server up", "http", httpAddr, "gossip", node.GossipAddr(), "data", absPath(f.data), "draining", draining)
	fmt.Fprintf(stdout, "shard %s serving on %s\n", id, httpAddr)

	select {
	case <-ctx.Done():
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) || errors.Is(err, context.Canceled) {
			err = nil
		}
	}
	node.Leave(2 * time.Second)
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	return err
}

// privateDir creates dir readable by its owner only, and closes an
// existing one that others could read: objects are other people's data.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, fi.Mode().Perm()&0o700); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
	}
	return nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
