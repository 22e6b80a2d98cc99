package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regen-s3/regen/internal/cluster"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/repair"
	"github.com/regen-s3/regen/shardserver"
)

// repairFlags configure a shard server's repair worker.
type repairFlags struct {
	grace, scan     time.Duration
	sync, fullScan  time.Duration
	scrubInterval   time.Duration
	workers         int
	rate, scrubRate int64
	method          string
}

// devRepairDefaults makes repair quick on one machine: under regen dev a
// dead child is rebuilt after seconds, not minutes. Its shard servers
// share one disk and the machine's cores, so each scrubs at 1 MiB/s: the
// default 8 MiB/s is one server's disk, and twelve at that rate (96 MiB/s
// of reads, checksums and loopback HTTP) took a quarter to a half of the
// shard servers' CPU in profiles of 1 MiB and 64 MiB GETs.
func devRepairDefaults() repair.Config {
	def := repair.DefaultConfig()
	def.Grace, def.ScanInterval, def.SyncInterval = 5*time.Second, time.Second, 10*time.Second
	def.ScrubRate = 1 << 20
	// Hourly at most: a pass over a dev cluster of small objects reads
	// nothing, but still steps over every inline manifest to find the
	// striped ones: 0.7-0.9 s of CPU per pass per server at a million
	// objects (750k manifests each), 1.6% of a core for twelve servers
	// every ten minutes, a third of issue 18's idle budget. Hourly it is
	// a quarter of a percent.
	def.ScrubInterval = time.Hour
	return def
}

// register declares the repair options with def's values as defaults
// (repair.DefaultConfig for regen shard, devRepairDefaults for regen dev).
func (f *repairFlags) register(o *optionSet, def repair.Config) {
	o.Duration(&f.grace, "repair-grace", "REGEN_REPAIR_GRACE", def.Grace, "how long a shard server must be dead before its shards are rebuilt elsewhere")
	o.Duration(&f.scan, "repair-scan", "REGEN_REPAIR_SCAN", def.ScanInterval, "how often local manifests are checked for lost shards")
	o.Duration(&f.fullScan, "repair-full-scan", "REGEN_REPAIR_FULL_SCAN", def.FullScanInterval, "longest time between walks of every local manifest while nothing changes (a healthy cluster skips the walks); 0 = walk on every scan")
	o.Duration(&f.sync, "sync-interval", "REGEN_SYNC_INTERVAL", def.SyncInterval, "how often manifests are compared with the peers' (range digests), so a write a live server missed is healed; 0 = only at start and when a peer returns")
	o.Int(&f.workers, "repair-workers", "REGEN_REPAIR_WORKERS", def.Workers, "repair jobs run at once on this server")
	o.Rate(&f.rate, "repair-rate", "REGEN_REPAIR_RATE", def.Rate, "cluster-wide repair traffic cap, bytes/s (e.g. 100MiB); 0 = unlimited")
	o.Rate(&f.scrubRate, "scrub-rate", "REGEN_SCRUB_RATE", def.ScrubRate, "bytes/s the scrubber reads to verify shards (e.g. 8MiB); 0 = off")
	o.Duration(&f.scrubInterval, "scrub-interval", "REGEN_SCRUB_INTERVAL", def.ScrubInterval, "least time from the start of one scrub pass to the start of the next (a pass that reads for longer is followed at once)")
	o.String(&f.method, "repair", "REGEN_REPAIR", def.Method, "repair method: auto, core, push or pull")
}

// Validate checks the repair options.
func (f *repairFlags) Validate() error {
	switch {
	case f.grace < 0:
		return badOption("repair-grace", "must not be negative")
	case f.scan <= 0:
		return badOption("repair-scan", "must be positive")
	case f.sync < 0:
		return badOption("sync-interval", "must not be negative")
	case f.fullScan < 0:
		return badOption("repair-full-scan", "must not be negative")
	case f.scrubInterval < 0:
		return badOption("scrub-interval", "must not be negative")
	case f.workers < 1:
		return badOption("repair-workers", "want at least 1")
	}
	switch f.method {
	case repair.Auto, "core", "push", "pull":
	default:
		return badOption("repair", "want auto, core, push or pull")
	}
	return nil
}

func (f *repairFlags) worker(id, dataDir string, log *slog.Logger, reg prometheus.Registerer, srv *shardserver.Server, node *cluster.Node, secret string, shardTLS *tls.Config) (*repair.Worker, error) {
	cfg := repair.DefaultConfig()
	cfg.NodeID, cfg.Logger = id, log.With("component", "repair")
	cfg.Grace, cfg.ScanInterval, cfg.SyncInterval, cfg.Workers = f.grace, f.scan, f.sync, f.workers
	cfg.FullScanInterval = f.fullScan
	cfg.Rate, cfg.ScrubRate, cfg.ScrubInterval, cfg.Method = f.rate, f.scrubRate, f.scrubInterval, f.method
	// The cost model starts from this machine's measured CPU and disk
	// rather than production guesses; network rates are learned from the
	// repairs themselves.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	model, err := repair.Calibrate(ctx, dataDir, cfg.Model)
	cancel()
	if err != nil {
		log.Warn("repair: calibration failed, using default rates", "err", err)
	} else {
		cfg.Model = model
		log.Info("repair: calibrated cost model", "cores", model.Cores, "decode_MBps", int(model.Decode/1e6),
			"msr_decode_MBps", int(model.MSRDecode/1e6), "move_MBps", int(model.Move/1e6),
			"fsync", model.Fsync, "disk_write_MBps", int(model.Default.DiskWrite/1e6))
	}
	// The executor's control requests answer only when a whole stripe
	// group is rebuilt, so they use the client without a response timeout.
	exec := repair.NewExecutor(shardrpc.New(secret, shardrpc.WithTLS(shardrpc.NewRepairHTTPClient(nil), shardTLS)), cfg.Logger)
	return repair.New(cfg, srv.Store(), node, shardrpc.New(secret, shardrpc.WithTLS(nil, shardTLS)), repair.Options{Metrics: reg, Executor: exec,
		CalibratePath: true, CalibrateDir: dataDir, DataPathBytes: srv.DataPathBytes, WrittenBytes: srv.WrittenBytes, Events: node.Events()})
}

// args passes the flags on to a child shard server.
func (f *repairFlags) args() []string {
	return []string{
		"--repair-grace", f.grace.String(), "--repair-scan", f.scan.String(), "--repair-full-scan", f.fullScan.String(),
		"--sync-interval", f.sync.String(),
		"--repair-workers", strconv.Itoa(f.workers), "--repair-rate", strconv.FormatInt(f.rate, 10),
		"--scrub-rate", strconv.FormatInt(f.scrubRate, 10), "--scrub-interval", f.scrubInterval.String(), "--repair", f.method,
	}
}
