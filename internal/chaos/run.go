package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/regen-s3/regen/internal/pause"
)

// Config is one chaos run.
type Config struct {
	Dev      DevConfig
	Duration time.Duration // of the workload under the nemesis
	Seed     uint64
	Clients  int
	Keys     int // split over the Buckets
	MaxValue int // bytes
	// MaxDown is how many shard servers the nemesis takes down at once
	// (n-k of the codes: 3 for rs-6-3 and clay-6-3).
	MaxDown   int
	OpTimeout time.Duration
	// HealWait bounds the wait for redundancy after each fault, HealTimeout
	// the one after the run, before the durability reads.
	HealWait, HealTimeout time.Duration
	// CheckTimeout bounds the linearizability check of one key.
	CheckTimeout time.Duration
	// ReportDir receives history.jsonl, nemesis.log, findings.txt,
	// cluster.txt (which shard server is which) and the visualizations of
	// illegal keys.
	ReportDir string
	// Progress, if set, is called about every second.
	Progress func(Progress)
}

// Progress is the run's state for a live status line.
type Progress struct {
	Elapsed                     time.Duration
	Phase                       string // "starting", "running", "healing", "reading", "checking"
	Ops, Acked, Failed, Refused int64
	Nemesis                     string
}

// RunResult is a run's figures and verdict.
type RunResult struct {
	Report
	Seed           uint64  `json:"seed"`
	Duration       float64 `json:"duration"` // seconds under the nemesis
	MaxHealSeconds float64 `json:"max_heal_seconds"`
	// FinalHealSeconds is the heal after the run; -1 when the cluster was
	// not fully redundant within HealTimeout.
	FinalHealSeconds float64 `json:"final_heal_seconds"`
	// TombstonesCollected is what the admin status reports collected
	// after the heal (a lower bound: a restarted server counts from its
	// restart): with a short --tombstone-grace, deleted keys whose
	// tombstones went during the run, and the checker judged what came
	// after.
	TombstonesCollected int64  `json:"tombstones_collected"`
	Heals               int    `json:"heals"`
	HealTimeouts        int    `json:"heal_timeouts"`
	Refused             int64  `json:"refused"` // operations not sent: gateway down
	Faults              int    `json:"faults"`
	ReportDir           string `json:"report_dir,omitempty"`
}

// Failed reports whether the run found anything wrong.
func (r RunResult) Failed() bool {
	return r.Violations > 0 || r.Lost+r.Stale+r.Resurrected+r.Corrupt+r.Conflicts+r.Unreadable+r.ListMissing+r.ListDeleted > 0
}

// Buckets are the run's buckets, their codes and whether versioning is
// enabled. A versioned bucket's key is the same register to the checker
// (a DELETE adds a delete marker, which reads as the key deleted; a PUT
// adds the newest version), through the versioned write, delete-marker
// and lookup paths.
var Buckets = []struct {
	Name, Code string
	Versioned  bool
}{{"chaos-rs", "rs-6-3", false}, {"chaos-clay", "clay-6-3", false}, {"chaos-ver", "rs-6-3", true}}

// Run starts a cluster, runs the workload under the nemesis for
// cfg.Duration, heals, reads every key back and checks the history. The
// cluster is stopped before it returns, whatever happened. An error means
// the run could not be carried out (or was interrupted), not that the
// store misbehaved: that is in the RunResult.
func Run(ctx context.Context, cfg Config) (RunResult, error) {
	res := RunResult{Seed: cfg.Seed, ReportDir: cfg.ReportDir}
	phase := func(p string) {
		if cfg.Progress != nil {
			cfg.Progress(Progress{Phase: p})
		}
	}
	phase("starting")
	cl, err := StartDev(ctx, cfg.Dev)
	if err != nil {
		return res, err
	}
	defer cl.Close()

	w := &Workload{Endpoints: cl.Endpoints(), AccessKey: cfg.Dev.AccessKey, SecretKey: cfg.Dev.SecretKey,
		Clients: cfg.Clients, Seed: cfg.Seed, OpTimeout: cfg.OpTimeout, MaxValue: cfg.MaxValue}
	if err := w.Connect(); err != nil {
		return res, err
	}
	for _, b := range Buckets {
		if err := w.clients[0].MakeBucket(ctx, b.Name, minio.MakeBucketOptions{}); err != nil {
			return res, fmt.Errorf("create bucket %s: %w", b.Name, err)
		}
		if err := cl.SetBucketCode(ctx, b.Name, b.Code); err != nil {
			return res, fmt.Errorf("bucket %s: %w", b.Name, err)
		}
		if b.Versioned {
			if err := w.clients[0].EnableVersioning(ctx, b.Name); err != nil {
				return res, fmt.Errorf("bucket %s: enable versioning: %w", b.Name, err)
			}
		}
	}
	for i := range cfg.Keys {
		w.Keys = append(w.Keys, fmt.Sprintf("%s/key-%02d", Buckets[i%len(Buckets)].Name, i))
	}

	start := time.Now()
	w.History = NewHistory(start)
	nem := &Nemesis{Target: cl, Seed: cfg.Seed, MaxDown: cfg.MaxDown, HealWait: cfg.HealWait, Since: w.History.Since}
	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var wg sync.WaitGroup
	var nemErr error
	wg.Add(2)
	go func() { defer wg.Done(); w.Run(runCtx) }()
	go func() { defer wg.Done(); nemErr = nem.Run(runCtx) }()
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if cfg.Progress != nil {
				cfg.Progress(Progress{Elapsed: time.Since(start), Phase: "running", Ops: w.NOps.Load(), Acked: w.NAcked.Load(),
					Failed: w.NFailed.Load(), Refused: w.NRefused.Load(), Nemesis: nem.State()})
			}
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	wg.Wait()
	<-progressDone
	res.Duration = time.Since(start).Seconds()
	res.Refused = w.NRefused.Load()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if nemErr != nil {
		return res, nemErr
	}

	// Heal, and wait for full redundancy before the durability reads.
	phase("healing")
	hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = nem.Heal(hctx)
	cancel()
	if err != nil {
		return res, err
	}
	if d, ok := nem.WaitRedundant(ctx, cfg.HealTimeout); ok {
		res.FinalHealSeconds = d.Seconds()
	} else {
		res.FinalHealSeconds = -1
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if st, err := cl.Status(ctx); err == nil {
		res.TombstonesCollected = st.TombstonesCollected
	}
	heals, timeouts := nem.Heals()
	res.Heals, res.HealTimeouts = len(heals), timeouts
	for _, d := range heals {
		res.MaxHealSeconds = max(res.MaxHealSeconds, d.Seconds())
	}

	phase("reading")
	for _, key := range w.Keys {
		for gw := range w.clients {
			w.History.Add(finalRead(ctx, w, gw, key))
		}
	}
	// And each bucket listed, both ways, through every gateway.
	for _, b := range Buckets {
		for gw := range w.clients {
			for _, delimited := range []bool{false, true} {
				w.History.Add(finalList(ctx, w, gw, b.Name, delimited))
			}
		}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}

	phase("checking")
	ops := w.History.Ops()
	res.Report = Check(ops, CheckOptions{Timeout: cfg.CheckTimeout, VizDir: filepath.Join(cfg.ReportDir, "viz")})
	res.Faults = nem.Faults()
	annotate(res.Findings, nem.Events())
	if err := writeReport(cfg.ReportDir, ops, nem.Events(), res); err != nil {
		return res, err
	}
	if cfg.ReportDir != "" {
		if err := os.WriteFile(filepath.Join(cfg.ReportDir, "cluster.txt"), []byte(cl.Describe()), 0o644); err != nil {
			return res, err
		}
	}
	return res, nil
}

// annotate adds to each finding the nemesis's actions from 15 seconds
// before its latest operation began until that ended (at most the last
// eight): the faults in place when the violation showed.
func annotate(fs []Finding, events []Event) {
	for i := range fs {
		var from, to time.Duration
		for _, o := range fs[i].Ops {
			from, to = max(from, o.Start), max(to, o.End)
		}
		var in []Event
		for _, e := range events {
			if e.At >= from-15*time.Second && e.At <= to {
				in = append(in, e)
			}
		}
		fs[i].Nemesis = in[max(0, len(in)-8):]
	}
}

// finalRead reads a key after the heal; a read that fails is retried for
// a while (a 503 right after the heal is no verdict), and the last attempt
// counts.
func finalRead(ctx context.Context, w *Workload, gw int, key string) Op {
	deadline := time.Now().Add(30 * time.Second)
	for {
		o := w.Read(ctx, gw, key)
		if o.Result != Failed || time.Now().After(deadline) || ctx.Err() != nil {
			return o
		}
		_ = pause.For(ctx, time.Second)
	}
}

// finalList lists a bucket after the heal, retried as finalRead is.
func finalList(ctx context.Context, w *Workload, gw int, bucket string, delimited bool) Op {
	deadline := time.Now().Add(30 * time.Second)
	for {
		o := w.list(ctx, w.Clients, gw, bucket, delimited)
		o.Final = true
		if o.Result != Failed || time.Now().After(deadline) || ctx.Err() != nil {
			return o
		}
		_ = pause.For(ctx, time.Second)
	}
}

// writeReport leaves the history, the nemesis's log and the findings in
// dir for a post-mortem.
func writeReport(dir string, ops []Op, events []Event, res RunResult) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, o := range ops {
		enc.Encode(o)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	var nl []byte
	for _, e := range events {
		nl = append(nl, e.String()+"\n"...)
	}
	if err := os.WriteFile(filepath.Join(dir, "nemesis.log"), nl, 0o644); err != nil {
		return err
	}
	var fl []byte
	for _, f := range res.Findings {
		fl = append(fl, f.String()+"\n\n"...)
	}
	for _, k := range res.Illegal {
		fl = append(fl, "not linearizable: "+k+"\n"...)
	}
	return os.WriteFile(filepath.Join(dir, "findings.txt"), fl, 0o644)
}
