package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/regen-s3/regen/internal/chaos"
)

// chaosFlags are the options of `regen chaos`.
type chaosFlags struct {
	duration, skew, opTimeout      time.Duration
	tombstoneGrace, gcDelay        time.Duration
	healWait, healTimeout, checkTO time.Duration
	seed, clients, keys, shards    int
	maxDown                        int
	chunk, maxValue                int64
	dir, check                     string
	keep, json                     bool
}

func (f *chaosFlags) register(o *optionSet) {
	o.Duration(&f.duration, "duration", "REGEN_CHAOS_DURATION", time.Minute, "how long the workload runs under the nemesis")
	o.Int(&f.seed, "seed", "REGEN_CHAOS_SEED", 0, "seed of the workload and the nemesis (0: a random one, printed)")
	o.Int(&f.clients, "clients", "REGEN_CHAOS_CLIENTS", 6, "concurrent S3 clients")
	o.Int(&f.keys, "keys", "REGEN_CHAOS_KEYS", 12, "keys, split over an rs-6-3, a clay-6-3 and a versioned rs-6-3 bucket")
	o.Int(&f.shards, "shards", "REGEN_CHAOS_SHARDS", 12, "shard servers of the cluster")
	o.Int(&f.maxDown, "max-down", "REGEN_CHAOS_MAX_DOWN", 3, "shard servers killed or paused at once (n-k of the codes: 3)")
	o.Duration(&f.skew, "skew", "REGEN_CHAOS_SKEW", -10*time.Minute, "clock offset of the second gateway (its --clock-offset)")
	o.Size(&f.chunk, "chunk-size", "REGEN_CHAOS_CHUNK_SIZE", 256<<10, "the gateways' shard chunk: small, so values of a few MiB span several stripes")
	o.Size(&f.maxValue, "max-value", "REGEN_CHAOS_MAX_VALUE", 3<<20, "largest value written (values range from 1 KiB)")
	o.Duration(&f.opTimeout, "op-timeout", "REGEN_CHAOS_OP_TIMEOUT", 20*time.Second, "a client gives up on an operation after this long (the operation is then indeterminate)")
	o.Duration(&f.tombstoneGrace, "tombstone-grace", "REGEN_CHAOS_TOMBSTONE_GRACE", 0, "the shard servers' --tombstone-grace (0: regen dev's default, 1h): a few seconds collects deleted keys' tombstones during the run")
	o.Duration(&f.gcDelay, "gc-delay", "REGEN_CHAOS_GC_DELAY", 0, "the shard servers' --gc-delay (0: regen dev's default, 1m); tombstones go only after it")
	o.Duration(&f.healWait, "heal-wait", "REGEN_CHAOS_HEAL_WAIT", 30*time.Second, "longest wait for full redundancy after each fault before the next")
	o.Duration(&f.healTimeout, "heal-timeout", "REGEN_CHAOS_HEAL_TIMEOUT", 2*time.Minute, "longest wait for full redundancy after the run, before the durability reads")
	o.Duration(&f.checkTO, "check-timeout", "REGEN_CHAOS_CHECK_TIMEOUT", time.Minute, "time limit of the linearizability check of one key (undecided keys are reported as unknown)")
	o.String(&f.dir, "dir", "REGEN_CHAOS_DIR", "", "directory for the cluster and the report (default: a temp dir, removed unless something failed)")
	o.String(&f.check, "check", "", "", "check the history.jsonl of an earlier run again (no cluster is started)")
	o.Bool(&f.keep, "keep", "", false, "keep the cluster's data and logs (and the report) even when the run passes")
	o.Bool(&f.json, "json", "", false, "print one JSON object (ops, acked, failed, lost, stale, resurrected, violations, max_heal_seconds, seed, duration, ...)")
}

// Validate checks chaos's options.
func (f *chaosFlags) Validate() error {
	switch {
	case f.duration <= 0:
		return badOption("duration", "must be positive")
	case f.seed < 0:
		return badOption("seed", "must not be negative")
	case f.clients < 1 || f.clients > 256:
		return badOption("clients", "want 1..256")
	case f.keys < len(chaos.Buckets) || f.keys > 1000:
		return badOption("keys", "want %d..1000 (at least one per bucket)", len(chaos.Buckets))
	case f.shards < 9 || f.shards > 64:
		return badOption("shards", "want 9..64 (the codes place 9 shards)")
	case f.maxDown < 1 || f.maxDown > 3:
		return badOption("max-down", "want 1..3 (the codes survive 3 failures)")
	case f.chunk < 4<<10 || f.chunk > 64<<20:
		return badOption("chunk-size", "want 4KiB..64MiB")
	case f.maxValue < 1<<10 || f.maxValue > 64<<20:
		return badOption("max-value", "want 1KiB..64MiB")
	case f.tombstoneGrace < 0 || f.gcDelay < 0:
		return badOption("tombstone-grace", "--tombstone-grace and --gc-delay must not be negative")
	case f.opTimeout <= 0 || f.healWait <= 0 || f.healTimeout <= 0 || f.checkTO <= 0:
		return badOption("op-timeout", "--op-timeout, --heal-wait, --heal-timeout and --check-timeout must be positive")
	}
	return nil
}

func runChaos(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("chaos", "Start a regen dev cluster and a second gateway (its clock skewed), run concurrent S3 clients\n"+
		"(PUT, conditional PUT, GET, HEAD, DELETE on a few keys) while a seeded nemesis kills, pauses and restarts\n"+
		"shard servers and the second gateway, heal, read every key back, and check the history: each key must be\n"+
		"linearizable and no acknowledged write lost or delete undone. Exits 1 on any violation.")
	var f chaosFlags
	f.register(o)
	if err := o.Parse(args, f.Validate); err != nil {
		return err
	}
	if f.check != "" {
		return chaosRecheck(f, stdout)
	}
	if f.seed == 0 {
		n, _ := rand.Int(rand.Reader, big.NewInt(1<<31))
		f.seed = int(n.Int64()) + 1
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, temp := f.dir, f.dir == ""
	if temp {
		if dir, err = os.MkdirTemp("", "regen-chaos-"); err != nil {
			return err
		}
	}
	var secret [12]byte
	rand.Read(secret[:])
	cfg := chaos.Config{
		Dev: chaos.DevConfig{Bin: self, Dir: filepath.Join(dir, "cluster"), Shards: f.shards, ChunkSize: fmt.Sprint(f.chunk),
			Skew: f.skew, AccessKey: "chaos", SecretKey: "chaos-" + hex.EncodeToString(secret[:]), Env: childEnv(), TombstoneGrace: f.tombstoneGrace, GCDelay: f.gcDelay},
		Duration: f.duration, Seed: uint64(f.seed), Clients: f.clients, Keys: f.keys, MaxValue: int(f.maxValue),
		MaxDown: f.maxDown, OpTimeout: f.opTimeout, HealWait: f.healWait, HealTimeout: f.healTimeout,
		CheckTimeout: f.checkTO, ReportDir: filepath.Join(dir, "report"),
	}
	if !f.json {
		fmt.Fprintf(stdout, "regen chaos: seed %d, %s under the nemesis; %d shard servers, 2 gateways (the second's clock %s), %d clients, %d keys over %s\n",
			f.seed, f.duration, f.shards, f.skew, f.clients, f.keys, bucketList())
	}
	cfg.Progress = chaosProgress(f.duration)
	res, err := chaos.Run(ctx, cfg)
	cfg.Progress(chaos.Progress{Phase: "done"})
	failed := err == nil && res.Failed()
	switch {
	case f.keep || failed:
	case temp:
		os.RemoveAll(dir)
		res.ReportDir = ""
	default:
		os.RemoveAll(cfg.Dev.Dir)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted; every process stopped")
		}
		return err
	}
	if f.json {
		b, _ := json.Marshal(chaosJSON(res))
		fmt.Fprintln(stdout, string(b))
	} else {
		printChaos(stdout, res)
	}
	if failed {
		return fmt.Errorf("%d of %d keys violated linearizability or durability, %d listing findings (seed %d); report in %s", res.Violations, res.Keys, res.ListMissing+res.ListDeleted, res.Seed, res.ReportDir)
	}
	return nil
}

// chaosRecheck checks a recorded history again (--check), with the
// visualizations beside it.
func chaosRecheck(f chaosFlags, stdout io.Writer) error {
	ops, err := chaos.ReadHistory(f.check)
	if err != nil {
		return err
	}
	var res chaos.RunResult
	res.Report = chaos.Check(ops, chaos.CheckOptions{Timeout: f.checkTO, VizDir: filepath.Join(filepath.Dir(f.check), "viz")})
	res.FinalHealSeconds = -1
	if f.json {
		b, _ := json.Marshal(chaosJSON(res))
		fmt.Fprintln(stdout, string(b))
	} else {
		printChaos(stdout, res)
	}
	if res.Failed() {
		return fmt.Errorf("%d of %d keys violated linearizability or durability, %d listing findings", res.Violations, res.Keys, res.ListMissing+res.ListDeleted)
	}
	return nil
}

// childEnv is this process's environment without the REGEN_* variables,
// which would change the cluster regen chaos starts.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REGEN_") {
			env = append(env, kv)
		}
	}
	return env
}

func bucketList() string {
	var s []string
	for _, b := range chaos.Buckets {
		if b.Versioned {
			s = append(s, b.Name+" ("+b.Code+", versioned)")
			continue
		}
		s = append(s, b.Name+" ("+b.Code+")")
	}
	return strings.Join(s, ", ")
}

// chaosJSON is the --json object: the figures first, findings last.
func chaosJSON(r chaos.RunResult) any {
	return struct {
		Ops            int             `json:"ops"`
		Acked          int             `json:"acked"`
		Failed         int             `json:"failed"`
		Lost           int             `json:"lost"`
		Stale          int             `json:"stale"`
		Resurrected    int             `json:"resurrected"`
		Violations     int             `json:"violations"`
		MaxHealSeconds float64         `json:"max_heal_seconds"`
		Seed           uint64          `json:"seed"`
		Duration       float64         `json:"duration"`
		Corrupt        int             `json:"corrupt"`
		Conflicts      int             `json:"conflicts"`
		Unreadable     int             `json:"unreadable"`
		Unknown        int             `json:"unknown"`
		Listings       int             `json:"listings"`
		ListMissing    int             `json:"list_missing"`
		ListDeleted    int             `json:"list_deleted"`
		Keys           int             `json:"keys"`
		Refused        int64           `json:"refused"`
		Faults         int             `json:"faults"`
		Heals          int             `json:"heals"`
		HealTimeouts   int             `json:"heal_timeouts"`
		FinalHeal      float64         `json:"final_heal_seconds"`
		Tombstones     int64           `json:"tombstones_collected"`
		Illegal        []string        `json:"illegal,omitempty"`
		Visualizations []string        `json:"visualizations,omitempty"`
		ReportDir      string          `json:"report_dir,omitempty"`
		Findings       []chaos.Finding `json:"findings,omitempty"`
	}{r.Ops, r.Acked, r.Report.Failed, r.Lost, r.Stale, r.Resurrected, r.Violations, r.MaxHealSeconds, r.Seed, r.Duration,
		r.Corrupt, r.Conflicts, r.Unreadable, r.Unknown, r.Listings, r.ListMissing, r.ListDeleted, r.Keys, r.Refused, r.Faults, r.Heals, r.HealTimeouts, r.FinalHealSeconds,
		r.TombstonesCollected, r.Illegal, r.Visualizations, r.ReportDir, r.Findings}
}

func printChaos(w io.Writer, r chaos.RunResult) {
	fmt.Fprintf(w, "  ops %d  acked writes %d  failed %d  (not sent, gateway down: %d)  faults %d\n", r.Ops, r.Acked, r.Report.Failed, r.Refused, r.Faults)
	fmt.Fprintf(w, "  lost %d  stale %d  resurrected %d  corrupt %d  conflicts %d  unreadable %d\n",
		r.Lost, r.Stale, r.Resurrected, r.Corrupt, r.Conflicts, r.Unreadable)
	fmt.Fprintf(w, "  violations %d of %d keys (undecided: %d)\n", r.Violations, r.Keys, r.Unknown)
	fmt.Fprintf(w, "  listings %d: keys missing %d, deleted keys shown %d\n", r.Listings, r.ListMissing, r.ListDeleted)
	final := fmt.Sprintf("%.1fs", r.FinalHealSeconds)
	if r.FinalHealSeconds < 0 {
		final = "not redundant in time"
	}
	if r.Heals > 0 || r.FinalHealSeconds >= 0 { // not for --check
		fmt.Fprintf(w, "  heal to full redundancy: max %.1fs over %d heals (%d not in time), after the run %s\n", r.MaxHealSeconds, r.Heals, r.HealTimeouts, final)
	}
	if r.TombstonesCollected > 0 {
		fmt.Fprintf(w, "  tombstones collected: %d (servers' removals, since their last start)\n", r.TombstonesCollected)
	}
	for _, f := range r.Findings {
		fmt.Fprintf(w, "\n  %s\n", strings.ReplaceAll(f.String(), "\n", "\n  "))
	}
	if len(r.Illegal) > 0 {
		fmt.Fprintf(w, "\n  not linearizable: %s\n", strings.Join(r.Illegal, ", "))
	}
	for _, v := range r.Visualizations {
		fmt.Fprintf(w, "  visualization: %s\n", v)
	}
	if r.ReportDir != "" {
		fmt.Fprintf(w, "  history, nemesis log and findings in %s\n", r.ReportDir)
	}
	if !r.Failed() {
		fmt.Fprintln(w, "  PASS: every key linearizable, nothing lost, stale or resurrected, every listing sound")
	}
}

// chaosProgress draws the run's progress on stderr: a bar redrawn in
// place on a terminal, a line every 10 seconds elsewhere.
func chaosProgress(total time.Duration) func(chaos.Progress) {
	tty := isTerminal(os.Stderr)
	var bar *progress
	var last time.Time
	lastPhase := ""
	return func(p chaos.Progress) {
		desc := p.Phase
		if p.Phase == "running" {
			desc = fmt.Sprintf("ops %d acked %d failed %d | %s", p.Ops, p.Acked, p.Failed, p.Nemesis)
		}
		if tty {
			if p.Phase == "done" {
				if bar != nil {
					bar.finish(os.Stderr, "done")
				}
				return
			}
			if bar == nil {
				bar = newProgress(os.Stderr)
			}
			secs := int64(total / time.Second)
			done := min(int64(p.Elapsed/time.Second), secs)
			if p.Phase != "running" && p.Phase != "starting" {
				done = secs // after the run: healing, reading, checking
			}
			bar.set(done, secs+1, desc)
			return
		}
		if p.Phase == "done" || (p.Phase == lastPhase && time.Since(last) < 10*time.Second) {
			return
		}
		last, lastPhase = time.Now(), p.Phase
		fmt.Fprintf(os.Stderr, "chaos %5.0fs %s\n", p.Elapsed.Seconds(), desc)
	}
}
