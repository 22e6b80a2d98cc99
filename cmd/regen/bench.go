package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/netlimit"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/stripe"
	"github.com/regen-s3/regen/repair"
	"github.com/regen-s3/regen/shardserver"
)

func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "repair":
			return runBenchRepair(ctx, args[1:], stdout)
		case "s3":
			return runBenchS3(ctx, args[1:], stdout)
		case "fill":
			return runBenchFill(ctx, args[1:], stdout)
		case "probe":
			return runBenchProbe(ctx, args[1:], stdout)
		case "s3-report":
			return runBenchS3Report(ctx, args[1:], stdout)
		}
	}
	return usageErrorf("usage: regen bench repair|s3|s3-report|fill|probe [flags]")
}

// BenchRow is one measured repair of `regen bench repair --json`.
type BenchRow struct {
	Method     string  `json:"method"`
	Code       string  `json:"code"`
	N          int     `json:"n"`
	K          int     `json:"k"`
	T          int     `json:"t"`
	SRU        int     `json:"sru"`
	NetLimit   int64   `json:"net_limit"`
	BytesLost  int64   `json:"bytes_lost"`
	BytesMoved int64   `json:"bytes_moved"`
	MaxNodeIn  int64   `json:"max_node_in"`
	Seconds    float64 `json:"seconds"`
	// MBps is bytes_lost / seconds (recovery throughput).
	MBps float64 `json:"mb_per_s"`
	// CPUPerGB is CPU seconds of all shard servers per GB rebuilt, less
	// their idle CPU (gossip, timers) over the same wall time.
	CPUPerGB float64 `json:"cpu_s_per_gb"`
	// Runs is how many times the method ran; Seconds, MBps and CPUPerGB
	// are medians, SecondsAll every run's time.
	// Cores is the servers' CPU seconds per wall second (of this
	// machine's cores): well below the core count means not CPU-bound.
	Cores      float64   `json:"cpu_cores"`
	Runs       int       `json:"runs"`
	SecondsAll []float64 `json:"seconds_all,omitempty"`
}

type benchFlags struct {
	codes, failures, methods, srus listFlag
	netLimit, dataPerNode, chunk   int64
	parallel, runs, groupStripes   int
	json                           bool
	dir                            string
}

func runBenchRepair(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("bench repair", "Time repair methods on a local cluster with a capped network (BENCHMARKS.md).")
	var f benchFlags
	o.List(&f.codes, "code", "", []string{"rs-6-3"}, "code(s) to benchmark, comma-separated")
	o.List(&f.failures, "failures", "", []string{"1"}, "lost shards per stripe group t, comma-separated")
	o.List(&f.methods, "methods", "", []string{"pull-rep,pull-sur,push-rep,push-sur,core"}, "methods, comma-separated")
	o.List(&f.srus, "sru", "", []string{"256KiB"}, "slice sizes, comma-separated, e.g. 64KiB,128KiB,256KiB")
	o.Rate(&f.netLimit, "net-limit", "", 12_500_000, "per-server network cap per direction (12.5MB = 100 Mb/s: the papers' 1 Gb/s scaled by 1/10, "+
		"because ~20 server processes share this machine's cores; 125MB = 1 Gb/s; 0 = none)")
	o.Size(&f.dataPerNode, "data-per-node", "", 32<<20, "shard data each of the n placement servers holds")
	o.Size(&f.chunk, "chunk", "", 1<<20, "shard chunk of a full stripe")
	o.Int(&f.groupStripes, "group-stripes", "", 16, "stripes per stripe group (one shard file per server per group)")
	o.Int(&f.parallel, "parallel", "", 2, "stripe groups repaired at once")
	o.Int(&f.runs, "runs", "", 1, "repeat every method this often (interleaved) and report medians")
	o.Bool(&f.json, "json", "", false, "print one JSON row per measurement instead of a table")
	o.String(&f.dir, "dir", "", "", "data directory for the bench cluster (default: a temp dir, removed)")
	err := o.Parse(args, func() error {
		switch {
		case f.dataPerNode <= 0:
			return badOption("data-per-node", "must be positive")
		case f.chunk <= 0:
			return badOption("chunk", "must be positive")
		case f.parallel < 1:
			return badOption("parallel", "want at least 1")
		case f.runs < 1:
			return badOption("runs", "want at least 1")
		case f.groupStripes < 1:
			return badOption("group-stripes", "want at least 1")
		}
		return nil
	})
	if err != nil {
		return err
	}
	split := func(l listFlag) []string {
		var out []string
		for _, v := range l {
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
		}
		return out
	}
	var methods []repair.Method
	for _, m := range split(f.methods) {
		pm, err := repair.ParseMethod(m)
		if err != nil {
			return usageError{err}
		}
		methods = append(methods, pm)
	}
	var srus []int
	for _, s := range split(f.srus) {
		v, err := netlimit.ParseRate(s)
		if err != nil || v < shardserver.MinSRU || v > shardserver.MaxSRU {
			return usageErrorf("--sru %q: want %d..%d bytes", s, shardserver.MinSRU, shardserver.MaxSRU)
		}
		srus = append(srus, int(v))
	}
	limit, perNode, chunk := f.netLimit, f.dataPerNode, f.chunk
	dir := f.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "regen-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var rows []BenchRow
	for _, code := range split(f.codes) {
		c, err := codec.Parse(code)
		if err != nil {
			return usageError{err}
		}
		for _, ts := range split(f.failures) {
			t, err := strconv.Atoi(ts)
			if err != nil || t < 1 || t > c.ParityShards() {
				return usageErrorf("--failures %q: want 1..%d for %s", ts, c.ParityShards(), code)
			}
			r, err := benchOne(ctx, stdout, filepath.Join(dir, fmt.Sprintf("%s-t%d", code, t)), c, t, methods, srus, limit, perNode, chunk, f)
			rows = append(rows, r...)
			if err != nil {
				return err
			}
		}
	}
	if !f.json {
		printBenchTable(stdout, rows)
	}
	return nil
}

// benchCluster is the shard-server processes of one bench run. They are
// started like regen dev's (devSupervisor): one that dies while coming up
// (a port taken under load) is restarted on fresh ports.
type benchCluster struct {
	sup   *devSupervisor
	nodes []repair.Node
	pids  []int
}

func (bc *benchCluster) stop() {
	if bc.sup != nil {
		bc.sup.stopAll()
	}
}

func startBenchCluster(ctx context.Context, dir string, n int, secret, limit string, client *shardrpc.Client) (*benchCluster, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	bc := &benchCluster{sup: &devSupervisor{ctx: ctx, self: self, stdout: os.Stderr, env: append(os.Environ(), "REGEN_CLUSTER_SECRET="+secret)}}
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("shard-%02d", i))
		if err := os.MkdirAll(d, 0o700); err != nil {
			return bc, err
		}
		id, err := shardserver.LoadOrCreateNodeID(d)
		if err != nil {
			return bc, err
		}
		args := []string{"shard", "--data", d, "--gossip-profile", "local", "--net-limit", limit, "--log-level", "warn"}
		if err := bc.sup.start(DevProcess{ID: id, Data: d}, args); err != nil {
			return bc, err
		}
	}
	// NB: generous: on a loaded two-core machine 20 servers opening their
	// pebble stores take a while.
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; i < n; {
		p := bc.sup.current()[i]
		if _, err := client.Stats(ctx, p.Addr); err == nil {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return bc, fmt.Errorf("shard server %s did not come up; see %s", p.Addr, filepath.Join(p.Data, "shard.log"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range bc.sup.started() {
		bc.nodes = append(bc.nodes, repair.Node{ID: p.ID, Addr: p.Addr})
		bc.pids = append(bc.pids, p.PID)
	}
	return bc, nil
}

// cpuSeconds sums user+system CPU time of pids from /proc.
func cpuSeconds(pids []int) float64 {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		// NB: fields after the parenthesised command name; utime and
		// stime are fields 14 and 15 (1-based) of the whole line.
		rest := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(rest) > 12 {
			u, _ := strconv.ParseInt(rest[11], 10, 64)
			st, _ := strconv.ParseInt(rest[12], 10, 64)
			ticks += u + st
		}
	}
	return float64(ticks) / 100 // USER_HZ
}

func benchOne(ctx context.Context, stdout io.Writer, dir string, c codec.Code, t int, methods []repair.Method, srus []int,
	limit, perNode, chunk int64, f benchFlags) ([]BenchRow, error) {
	n, k := c.TotalShards(), c.DataShards()
	chunk = codec.ChunkSize(c, chunk)
	var sb [16]byte
	rand.Read(sb[:])
	secret := hex.EncodeToString(sb[:])
	client := shardrpc.New(secret, shardrpc.NewRepairHTTPClient(nil))
	// n placement servers and t spares: the replacements of the dead.
	bc, err := startBenchCluster(ctx, dir, n+t, secret, strconv.FormatInt(limit, 10), client)
	defer bc.stop()
	if err != nil {
		return nil, err
	}
	placement, spares := bc.nodes[:n], bc.nodes[n:]

	// Stripe groups of --group-stripes stripes; enough groups that every
	// placement server holds about perNode bytes.
	stripesPer := int64(f.groupStripes)
	partSize := int64(k) * chunk * stripesPer
	groups := max(1, int((perNode+chunk*stripesPer-1)/(chunk*stripesPer)))
	targets := make([]stripe.Target, n)
	for i, nd := range placement {
		targets[i] = stripe.Target{Node: nd.ID, Addr: nd.Addr}
	}
	if !f.json {
		fmt.Fprintf(stdout, "%s t=%d: writing %d groups of %d MiB to %d servers (net limit %d B/s)\n", c.Name(), t, groups, partSize>>20, n, limit)
	}
	tasks := make([]repair.Task, groups)
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(4)
	for g := range groups {
		eg.Go(func() error {
			fileID := fmt.Sprintf("bench%04d", g)
			res, err := stripe.Write(gctx, client, stripe.WriteParams{Code: c, ChunkSize: chunk, FileID: fileID, Targets: targets, Quorum: n, Size: partSize},
				&randReader{})
			if err != nil {
				return fmt.Errorf("write group %d: %w", g, err)
			}
			tasks[g] = repair.Task{Code: c.Name(), FileID: fileID, ChunkSize: chunk, PartSize: partSize, ShardCRC: res.ShardCRC, Placement: placement}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	// Kill the servers of shards 0..t-1 (data shards: the expensive case).
	lost := make([]int, t)
	for i := range t {
		lost[i] = i
		bc.sup.kill(i)
	}
	shardSize := stripe.Geometry(c, chunk).ShardFileSize(partSize)
	pids := make([]int, 0, n)
	for i := t; i < len(bc.pids); i++ {
		pids = append(pids, bc.pids[i])
	}
	// Idle CPU of the live servers (gossip, timers), subtracted from each
	// measurement so CPU s/GB counts the repair's work only.
	idle0, idleT := cpuSeconds(pids), time.Now()
	time.Sleep(2 * time.Second)
	idleRate := (cpuSeconds(pids) - idle0) / time.Since(idleT).Seconds()

	exec := repair.NewExecutor(client, nil)
	// measure runs meth once and returns its row (Runs 1).
	measure := func(meth repair.Method, sru int) (BenchRow, error) {
		var bar *progressbar.ProgressBar
		if !f.json {
			bar = progressbar.NewOptions(groups, progressbar.OptionSetDescription(fmt.Sprintf("%-8s sru %4d KiB", meth, sru>>10)),
				progressbar.OptionSetWriter(os.Stderr), progressbar.OptionClearOnFinish())
		}
		row := BenchRow{Method: string(meth), Code: c.Name(), N: n, K: k, T: t, SRU: sru, NetLimit: limit, BytesLost: int64(groups*t) * shardSize, Runs: 1}
		// NB: a pause longer than netlimit's idle gap, so every emulated
		// link starts the method idle, with no credit from the last one.
		time.Sleep(300 * time.Millisecond)
		cpu0 := cpuSeconds(pids)
		start := time.Now()
		eg, gctx := errgroup.WithContext(ctx)
		eg.SetLimit(f.parallel)
		var (
			moved  atomic.Int64
			mu     sync.Mutex
			nodeIn = map[string]int64{}
		)
		for g := range groups {
			eg.Go(func() error {
				task := tasks[g]
				task.Lost, task.Method, task.SRU = lost, meth, sru
				task.Dest = map[int]repair.Node{}
				for j, l := range lost {
					task.Dest[l] = spares[j]
				}
				res, err := exec.Run(gctx, task)
				if err != nil {
					return err
				}
				moved.Add(res.BytesMoved)
				mu.Lock()
				for id, b := range res.NodeIn {
					nodeIn[id] += b
				}
				mu.Unlock()
				if bar != nil {
					bar.Add(1)
				}
				return nil
			})
		}
		if err := eg.Wait(); err != nil {
			return row, fmt.Errorf("%s %s t=%d: %w", c.Name(), meth, t, err)
		}
		row.Seconds = time.Since(start).Seconds()
		cpu := max(0, cpuSeconds(pids)-cpu0-idleRate*row.Seconds)
		if bar != nil {
			bar.Finish()
		}
		row.BytesMoved = moved.Load()
		for _, b := range nodeIn {
			row.MaxNodeIn = max(row.MaxNodeIn, b)
		}
		row.MBps = float64(row.BytesLost) / 1e6 / row.Seconds
		row.CPUPerGB = cpu / (float64(row.BytesLost) / 1e9)
		row.Cores = cpu / row.Seconds
		// Verify every rebuilt shard (size and CRC-32C of its data,
		// which the server computed from the bytes on disk), then
		// remove it for the next method.
		for _, task := range tasks {
			for j, l := range lost {
				info, err := client.StatShard(ctx, spares[j].Addr, task.FileID, l)
				if err != nil || info.Size != shardSize || info.CRC != task.ShardCRC[l] {
					return row, fmt.Errorf("%s %s: rebuilt shard %s.%d is wrong: %+v, %v", c.Name(), meth, task.FileID, l, info, err)
				}
				if err := client.DeleteShard(ctx, spares[j].Addr, task.FileID, l); err != nil {
					return row, err
				}
			}
		}
		return row, nil
	}
	var rows []BenchRow
	for _, sru := range srus {
		// NB: runs interleave the methods, so a change in the machine's
		// load hits every method alike rather than one method's runs.
		all := make([][]BenchRow, len(methods))
		for range f.runs {
			for i, meth := range methods {
				r, err := measure(meth, sru)
				if err != nil {
					return rows, err
				}
				all[i] = append(all[i], r)
			}
		}
		for _, rs := range all {
			row := medianRow(rs)
			rows = append(rows, row)
			if f.json {
				b, _ := json.Marshal(row)
				fmt.Fprintln(stdout, string(b))
			}
		}
	}
	return rows, nil
}

// medianRow is rs[0] with the median time, throughput and CPU of rs.
func medianRow(rs []BenchRow) BenchRow {
	med := func(get func(BenchRow) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	row := rs[0]
	row.Runs = len(rs)
	row.Seconds = med(func(r BenchRow) float64 { return r.Seconds })
	row.CPUPerGB = med(func(r BenchRow) float64 { return r.CPUPerGB })
	row.Cores = med(func(r BenchRow) float64 { return r.Cores })
	row.MBps = float64(row.BytesLost) / 1e6 / row.Seconds
	for _, r := range rs {
		row.SecondsAll = append(row.SecondsAll, math.Round(r.Seconds*1000)/1000)
	}
	return row
}

// randReader yields pseudo-random bytes fast (the content does not matter,
// only that it is not compressible or all zero).
type randReader struct{ x uint64 }

func (r *randReader) Read(p []byte) (int, error) {
	if r.x == 0 {
		r.x = 0x9E3779B97F4A7C15
	}
	for i := range p {
		r.x ^= r.x << 13
		r.x ^= r.x >> 7
		r.x ^= r.x << 17
		p[i] = byte(r.x)
	}
	return len(p), nil
}

func printBenchTable(w io.Writer, rows []BenchRow) {
	fmt.Fprintf(w, "\n%-9s %-10s %2s %6s %10s %10s %10s %9s %8s %8s\n", "method", "code", "t", "sru", "lost MB", "moved MB", "maxin MB", "seconds", "MB/s", "cpu s/GB")
	for _, r := range rows {
		fmt.Fprintf(w, "%-9s %-10s %2d %5dK %10.1f %10.1f %10.1f %9.2f %8.1f %8.2f\n", r.Method, r.Code, r.T, r.SRU>>10,
			float64(r.BytesLost)/1e6, float64(r.BytesMoved)/1e6, float64(r.MaxNodeIn)/1e6, r.Seconds, r.MBps, r.CPUPerGB)
	}
}
