package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/netlimit"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/shardserver"
)

type shardFlags struct {
	data, listen, gossip, advertise, advertiseHTTP string
	join                                           listFlag
	secret, zone, replaces                         string
	logFormat, logLevel, profile                   string
	uploadMaxAge, uploadSweep                      time.Duration
	gcDelay, rollbackAfter                         time.Duration
	repair                                         repairFlags
	netLimit                                       string
}

func (f *shardFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.data, "data", env("REGEN_DATA", "./data/shard"), "data directory: shard files, pebble DB, node ID (REGEN_DATA)")
	fs.StringVar(&f.listen, "listen", env("REGEN_LISTEN", "127.0.0.1:9100"), "shard API listen address host:port (REGEN_LISTEN)")
	fs.StringVar(&f.advertiseHTTP, "advertise-http", env("REGEN_ADVERTISE_HTTP", ""), "shard API address told to peers, if different (REGEN_ADVERTISE_HTTP)")
	fs.StringVar(&f.gossip, "gossip", env("REGEN_GOSSIP", "127.0.0.1:7947"), "gossip listen address host:port (REGEN_GOSSIP)")
	fs.StringVar(&f.advertise, "advertise", env("REGEN_ADVERTISE", ""), "gossip address told to peers, if different (REGEN_ADVERTISE)")
	f.join = envList("REGEN_JOIN")
	fs.Var(&f.join, "join", "gossip address of a cluster member, repeatable (REGEN_JOIN, comma-separated)")
	fs.StringVar(&f.secret, "secret", env("REGEN_CLUSTER_SECRET", ""), "cluster secret shared by all nodes (REGEN_CLUSTER_SECRET)")
	fs.StringVar(&f.zone, "zone", env("REGEN_ZONE", ""), "failure zone of this server (REGEN_ZONE)")
	fs.StringVar(&f.replaces, "replaces", env("REGEN_REPLACES", ""), "node ID of a dead server this new one replaces (REGEN_REPLACES)")
	fs.StringVar(&f.logFormat, "log-format", env("REGEN_LOG_FORMAT", "text"), "log format: text or json (REGEN_LOG_FORMAT)")
	fs.StringVar(&f.logLevel, "log-level", env("REGEN_LOG_LEVEL", "info"), "log level (REGEN_LOG_LEVEL)")
	f.repair.register(fs)
	fs.StringVar(&f.profile, "gossip-profile", env("REGEN_GOSSIP_PROFILE", "lan"), "gossip timing: lan, or local for one machine (REGEN_GOSSIP_PROFILE)")
	fs.StringVar(&f.netLimit, "net-limit", env("REGEN_NET_LIMIT", "0"), "cap shard traffic per direction, e.g. 125MB for 1 Gb/s; emulates a NIC (not switch incast) when many servers share one machine; 0 = unlimited (REGEN_NET_LIMIT)")
	def := shardserver.DefaultConfig()
	fs.DurationVar(&f.uploadMaxAge, "upload-max-age", envDuration("REGEN_UPLOAD_MAX_AGE", def.UploadMaxAge), "abort incomplete multipart uploads older than this (REGEN_UPLOAD_MAX_AGE)")
	fs.DurationVar(&f.gcDelay, "gc-delay", envDuration("REGEN_GC_DELAY", def.GCDelay), "how long after a replacement its confirm job runs; a replaced version's shards go only once the replacement is confirmed (REGEN_GC_DELAY)")
	fs.DurationVar(&f.rollbackAfter, "rollback-after", envDuration("REGEN_ROLLBACK_AFTER", def.RollbackAfter), "roll back a replacing manifest that provably never reached a write quorum after this long; must outlast the slowest PUT (REGEN_ROLLBACK_AFTER)")
	fs.DurationVar(&f.uploadSweep, "upload-sweep-interval", envDuration("REGEN_UPLOAD_SWEEP_INTERVAL", def.UploadSweepInterval), "how often abandoned multipart uploads are looked for (REGEN_UPLOAD_SWEEP_INTERVAL)")
}

func runShard(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("shard", flag.ContinueOnError)
	var f shardFlags
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.secret == "" {
		return usageErrorf("--secret (or REGEN_CLUSTER_SECRET) is required: the cluster secret shared by all nodes")
	}
	log, err := newLogger(f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.data, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	id, err := shardserver.LoadOrCreateNodeID(f.data)
	if err != nil {
		return err
	}
	log = log.With("node", id)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	cfg := shardserver.DefaultConfig()
	cfg.DataDir, cfg.Secret, cfg.NodeID = f.data, f.secret, id
	cfg.Logger, cfg.Registerer = log, reg
	cfg.UploadMaxAge, cfg.UploadSweepInterval = f.uploadMaxAge, f.uploadSweep
	cfg.GCDelay, cfg.RollbackAfter = f.gcDelay, f.rollbackAfter
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
	rateLimit, err := netlimit.ParseRate(f.netLimit)
	if err != nil {
		return usageErrorf("--net-limit: %v", err)
	}
	// NB: one limiter for the listener and the peer dialer: the cap is the
	// server's, like a NIC's, whichever side opened the connection.
	limiter := netlimit.New(rateLimit)
	cfg.RepairHTTP = shardrpc.NewRepairHTTPClient(limiter.Dialer((&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext))
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

	worker, err := f.repair.worker(id, f.data, log, reg, srv, node, f.secret)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle(shardrpc.PathRepairStatus, requireSecret(f.secret, worker.Handler()))
	mux.Handle(shardrpc.PathRepairSync, requireSecret(f.secret, worker.SyncHandler()))
	mux.Handle("/", srv.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(limiter.Listener(ln)) }()
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

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
