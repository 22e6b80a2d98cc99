package main

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"
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
	sync            time.Duration
	workers         int
	rate, scrubRate int64
	method          string
}

func (f *repairFlags) register(fs *flag.FlagSet) {
	def := repair.DefaultConfig()
	fs.DurationVar(&f.grace, "repair-grace", envDuration("REGEN_REPAIR_GRACE", def.Grace), "how long a shard server must be dead before its shards are rebuilt elsewhere (REGEN_REPAIR_GRACE)")
	fs.DurationVar(&f.scan, "repair-scan", envDuration("REGEN_REPAIR_SCAN", def.ScanInterval), "how often local manifests are checked for lost shards (REGEN_REPAIR_SCAN)")
	fs.DurationVar(&f.sync, "sync-interval", envDuration("REGEN_SYNC_INTERVAL", def.SyncInterval), "how often recent writes are checked with their placement peers, so one a live server missed is healed; 0 = only when a peer returns (REGEN_SYNC_INTERVAL)")
	fs.IntVar(&f.workers, "repair-workers", envInt("REGEN_REPAIR_WORKERS", def.Workers), "repair jobs run at once on this server (REGEN_REPAIR_WORKERS)")
	fs.Int64Var(&f.rate, "repair-rate", envInt64("REGEN_REPAIR_RATE", def.Rate), "cluster-wide repair traffic cap in bytes/s, 0 = unlimited (REGEN_REPAIR_RATE)")
	fs.Int64Var(&f.scrubRate, "scrub-rate", envInt64("REGEN_SCRUB_RATE", def.ScrubRate), "bytes/s the scrubber reads to verify shards, 0 = off (REGEN_SCRUB_RATE)")
	fs.StringVar(&f.method, "repair", env("REGEN_REPAIR", repair.Auto), "repair method: auto, core, push or pull (REGEN_REPAIR)")
}

func (f *repairFlags) worker(id, dataDir string, log *slog.Logger, reg prometheus.Registerer, srv *shardserver.Server, node *cluster.Node, secret string) (*repair.Worker, error) {
	cfg := repair.DefaultConfig()
	cfg.NodeID, cfg.Logger = id, log.With("component", "repair")
	cfg.Grace, cfg.ScanInterval, cfg.SyncInterval, cfg.Workers = f.grace, f.scan, f.sync, f.workers
	cfg.Rate, cfg.ScrubRate, cfg.Method = f.rate, f.scrubRate, f.method
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
	exec := repair.NewExecutor(shardrpc.New(secret, shardrpc.NewRepairHTTPClient(nil)), cfg.Logger)
	return repair.New(cfg, srv.Store(), node, shardrpc.New(secret, nil), repair.Options{Metrics: reg, Executor: exec,
		CalibratePath: true, CalibrateDir: dataDir, DataPathBytes: srv.DataPathBytes, WrittenBytes: srv.WrittenBytes})
}

// requireSecret guards h with the cluster secret, like the shard API.
func requireSecret(secret string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !shardrpc.CheckSecret(r, secret) {
			shardrpc.WriteError(w, http.StatusUnauthorized, shardrpc.CodeUnauthorized, "missing or wrong cluster secret")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// envInt64 is envInt for byte counts and rates.
func envInt64(name string, def int64) int64 {
	return int64(envInt(name, int(def)))
}

// devDefaults makes repair quick on one machine: a dead child is rebuilt
// after seconds, not minutes. Flags and variables the user set win.
func (f *repairFlags) devDefaults(setByUser map[string]bool) {
	if !setByUser["repair-grace"] && os.Getenv("REGEN_REPAIR_GRACE") == "" {
		f.grace = 5 * time.Second
	}
	if !setByUser["repair-scan"] && os.Getenv("REGEN_REPAIR_SCAN") == "" {
		f.scan = time.Second
	}
	if !setByUser["sync-interval"] && os.Getenv("REGEN_SYNC_INTERVAL") == "" {
		f.sync = 10 * time.Second
	}
}

// args passes the flags on to a child shard server.
func (f *repairFlags) args() []string {
	return []string{
		"--repair-grace", f.grace.String(), "--repair-scan", f.scan.String(), "--sync-interval", f.sync.String(),
		"--repair-workers", strconv.Itoa(f.workers), "--repair-rate", strconv.FormatInt(f.rate, 10),
		"--scrub-rate", strconv.FormatInt(f.scrubRate, 10), "--repair", f.method,
	}
}
