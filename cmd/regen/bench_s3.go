package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/regen-s3/regen/internal/s3bench"
)

// runBenchS3 is `regen bench s3`: the S3 workloads of internal/s3bench
// against any endpoint, regen or not.
func runBenchS3(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("bench s3", "Run S3 workloads against an endpoint, regen or not (BENCHMARKS.md, scripts/bench-vs-minio.sh).")
	cfg := s3bench.DefaultConfig()
	var (
		t                s3bench.Target
		workloads, sizes listFlag
		partSize         int64
		asJSON, quiet    bool
		defSizes         []string
	)
	for _, n := range cfg.Sizes {
		defSizes = append(defSizes, fmtSize(n))
	}
	targetFlags(o, &t)
	o.String(&cfg.Bucket, "bucket", "", "", "bucket to work in; it must be empty (default: a new bucket regen-bench-<random>, removed at the end)")
	o.List(&workloads, "workloads", "", cfg.Workloads, "workload groups, comma-separated, of "+strings.Join(s3bench.AllWorkloads, ","))
	o.List(&sizes, "sizes", "", defSizes, "PUT/GET object sizes, comma-separated (HEAD uses the first)")
	o.Int(&cfg.Concurrency, "concurrency", "", 0, "PUT/GET concurrency (0: by size, 16 up to 64 KiB, 8 up to 16 MiB, 4 above)")
	o.Int(&cfg.HeadConcurrency, "head-concurrency", "", cfg.HeadConcurrency, "HEAD concurrency")
	o.Duration(&cfg.Duration, "duration", "", cfg.Duration, "time bound of each workload (0: none; then --count bounds)")
	o.Int(&cfg.Count, "count", "", 0, "op bound of each PUT/GET/HEAD workload and listing bound of each listing workload (0: none)")
	o.Int(&cfg.MetaObjects, "meta-objects", "", cfg.MetaObjects, "objects of the listing and DeleteObjects set")
	o.Int(&cfg.MetaPrefixes, "meta-prefixes", "", cfg.MetaPrefixes, "prefixes the listing set is spread over")
	o.Size(&cfg.MetaSize, "meta-size", "", cfg.MetaSize, "object size of the listing set")
	o.Size(&partSize, "part-size", "", 0, "multipart part size of large PUTs (0: the client's default, 16 MiB parts above 16 MiB)")
	o.Bool(&asJSON, "json", "", false, "print one JSON object per workload on stdout as it ends, and no table")
	o.Bool(&quiet, "quiet", "", false, "no live progress line (it is drawn only when stderr is a terminal)")
	err := o.Parse(args, func() error {
		cfg.Workloads = workloads
		cfg.Sizes = nil
		for _, s := range sizes {
			n, err := parseSize(s)
			if err != nil {
				return badOption("sizes", "%q: %v", s, err)
			}
			cfg.Sizes = append(cfg.Sizes, n)
		}
		cfg.PartSize = uint64(partSize)
		return cfg.Validate()
	})
	if err != nil {
		return err
	}
	client, err := s3bench.NewClient(t)
	if err != nil {
		return usageError{err}
	}

	var line *benchLine
	switch {
	case quiet:
	case isTerminal(os.Stderr):
		line = &benchLine{w: os.Stderr}
		cfg.OnProgress = line.update
	default:
		// Not a terminal: a timestamped line as each workload starts, so
		// that scripts (scripts/profile-data-path.sh) can time profiles.
		started := ""
		cfg.OnProgress = func(p s3bench.Progress) {
			if p.Workload != started {
				started = p.Workload
				fmt.Fprintf(os.Stderr, "%s %s started\n", time.Now().Format("15:04:05.000"), p.Workload)
			}
		}
	}
	cfg.OnResult = func(r s3bench.Result) {
		if line != nil {
			line.done()
		}
		if asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(stdout, string(b))
		}
		if !quiet {
			fmt.Fprintf(os.Stderr, "%s\n", resultSummary(r))
		}
	}
	results, err := s3bench.Run(ctx, client, cfg)
	if line != nil {
		line.done()
	}
	if !asJSON && len(results) > 0 {
		printS3Table(stdout, results)
	}
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		if r.Errors > 0 {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d workloads had errors (see the errors field)", failed)
	}
	return nil
}

// benchLine is the live progress line: one progress bar per workload,
// redrawn in place, filled by ops when a count bounds the workload and by
// time otherwise.
type benchLine struct {
	w    io.Writer
	name string
	bar  *progressbar.ProgressBar
}

func (l *benchLine) update(p s3bench.Progress) {
	total, done := int64(p.Duration/(100*time.Millisecond)), int64(p.Elapsed/(100*time.Millisecond))
	if p.Total > 0 {
		total, done = p.Total, p.Ops+p.Errors
	}
	if l.bar == nil || l.name != p.Workload {
		l.done()
		l.name = p.Workload
		l.bar = progressbar.NewOptions64(max(total, 1),
			progressbar.OptionSetWriter(l.w),
			progressbar.OptionSetWidth(20),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionClearOnFinish(),
		)
	}
	secs := max(p.Elapsed.Seconds(), 1e-3)
	desc := fmt.Sprintf("%-16s %6d ops %8.1f ops/s", p.Workload, p.Ops, float64(p.Ops)/secs)
	if p.Bytes > 0 {
		desc += fmt.Sprintf(" %7.1f MB/s", float64(p.Bytes)/1e6/secs)
	}
	if p.Items > 0 && p.Bytes == 0 {
		desc += fmt.Sprintf(" %8.0f items/s", float64(p.Items)/secs)
	}
	if p.Errors > 0 {
		desc += fmt.Sprintf(" %d errors", p.Errors)
	}
	l.bar.Describe(desc)
	_ = l.bar.Set64(min(done, max(total, 1)-1))
}

func (l *benchLine) done() {
	if l.bar != nil {
		_ = l.bar.Finish()
		l.bar = nil
	}
}

func resultSummary(r s3bench.Result) string {
	s := fmt.Sprintf("%-16s c%-3d %7d ops %9.1f ops/s", r.Workload, r.Concurrency, r.Ops, r.OpsPerS)
	if r.MBPerS > 0 {
		s += fmt.Sprintf(" %8.1f MB/s", r.MBPerS)
	}
	if r.ItemsPerS > 0 {
		s += fmt.Sprintf(" %9.0f items/s", r.ItemsPerS)
	}
	s += fmt.Sprintf("  p50 %8.2f ms  p99 %8.2f ms", r.P50Ms, r.P99Ms)
	if r.Errors > 0 {
		s += fmt.Sprintf("  %d ERRORS", r.Errors)
	}
	return s
}

func printS3Table(w io.Writer, rs []s3bench.Result) {
	fmt.Fprintf(w, "\n%-16s %4s %8s %7s %10s %9s %10s %9s %9s\n", "workload", "conc", "ops", "errors", "ops/s", "MB/s", "items/s", "p50 ms", "p99 ms")
	for _, r := range rs {
		fmt.Fprintf(w, "%-16s %4d %8d %7d %10.1f %9.1f %10.0f %9.2f %9.2f\n", r.Workload, r.Concurrency, r.Ops, r.Errors, r.OpsPerS, r.MBPerS, r.ItemsPerS, r.P50Ms, r.P99Ms)
	}
}

// isTerminal reports whether f is a character device (a terminal): a
// progress line redrawn in place is only readable there.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// runBenchS3Report is `regen bench s3-report DIR`: the markdown table of
// the runs in DIR, files SYSTEM-rROUND.jsonl written by `bench s3 --json`
// (scripts/bench-vs-minio.sh writes them).
func runBenchS3Report(_ context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("bench s3-report", "Print the medians and ratios of the runs in DIR (files SYSTEM-rROUND.jsonl of 'bench s3 --json') as a markdown table.")
	o.args = "DIR"
	var order listFlag
	o.List(&order, "systems", "", nil, "systems in column order, comma-separated; ratios are the first ÷ each other (default: all found, sorted)")
	pos, err := o.ParseArgs(args, nil)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("usage: regen bench s3-report [--systems a,b,c] DIR")
	}
	dir := pos[0]
	files, err := filepath.Glob(filepath.Join(dir, "*-r*.jsonl"))
	if err != nil {
		return err
	}
	bySystem := map[string][][]s3bench.Result{}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		sys := base[:strings.LastIndex(base, "-r")]
		rs, err := readResults(f)
		if err != nil {
			return err
		}
		bySystem[sys] = append(bySystem[sys], rs)
	}
	if len(order) == 0 {
		for s := range bySystem {
			order = append(order, s)
		}
		slices.Sort(order)
	}
	var runs []s3bench.Runs
	for _, s := range order {
		if len(bySystem[s]) == 0 {
			return fmt.Errorf("no runs of %s in %s", s, dir)
		}
		runs = append(runs, s3bench.Runs{System: s, Rounds: bySystem[s]})
	}
	if len(runs) == 0 {
		return fmt.Errorf("no SYSTEM-rN.jsonl files in %s", dir)
	}
	s3bench.Report(stdout, runs)
	return nil
}

// readResults reads one JSON result a line.
func readResults(path string) ([]s3bench.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []s3bench.Result
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r s3bench.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// targetFlags declares the S3 endpoint and credentials of the bench
// commands (s3, fill, probe), which talk to any S3 server.
func targetFlags(o *optionSet, t *s3bench.Target) {
	o.String(&t.Endpoint, "endpoint", "REGEN_ENDPOINT", "http://127.0.0.1:9000", "S3 endpoint, http(s)://host:port")
	o.String(&t.Access, "access", "REGEN_ACCESS_KEY", defaultAccessKey, "access key").alsoEnv("AWS_ACCESS_KEY_ID")
	o.String(&t.Secret, "secret", "REGEN_SECRET_KEY", defaultSecretKey, "secret key").alsoEnv("AWS_SECRET_ACCESS_KEY")
	o.String(&t.Region, "region", "", "us-east-1", "region to sign for")
}
