package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/regen-s3/regen/internal/s3bench"
)

// runBenchFill is `regen bench fill`: a bulk load of many small objects
// through the S3 API, for the scale run of issue 18 (scripts/scale-run.sh).
// It prints where to resume when interrupted.
func runBenchFill(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("bench fill", "Write many small objects through the S3 API (a scale run's data set); any S3 endpoint.\nObject i is p<i mod prefixes>/o<i>; a stopped load resumes with --start.")
	cfg := s3bench.DefaultFillConfig()
	var (
		t      s3bench.Target
		asJSON bool
		quiet  bool
	)
	targetFlags(o, &t)
	o.String(&cfg.Bucket, "bucket", "", cfg.Bucket, "bucket to fill (made when missing, never emptied)")
	o.Int(&cfg.Objects, "objects", "", cfg.Objects, "objects to write")
	o.Int(&cfg.Start, "start", "", cfg.Start, "index of the first object (to resume a stopped load)")
	o.Int(&cfg.Prefixes, "prefixes", "", cfg.Prefixes, "prefixes the objects are spread over")
	o.Size(&cfg.Size, "size", "", cfg.Size, "object size")
	o.Int(&cfg.Concurrency, "concurrency", "", cfg.Concurrency, "PUTs in flight")
	o.Bool(&asJSON, "json", "", false, "print the result as one JSON object")
	o.Bool(&quiet, "quiet", "", false, "no progress bar")
	if err := o.Parse(args, cfg.Validate); err != nil {
		return err
	}
	client, err := s3bench.NewClient(t)
	if err != nil {
		return usageError{err}
	}
	if !quiet {
		var line *benchLine
		if isTerminal(os.Stderr) {
			line = &benchLine{w: os.Stderr}
			cfg.OnProgress = line.update
			defer line.done()
		} else {
			// A line every 10 s for logs.
			last := time.Now()
			cfg.OnProgress = func(p s3bench.Progress) {
				if time.Since(last) >= 10*time.Second {
					last = time.Now()
					fmt.Fprintf(os.Stderr, "%s fill: %d/%d objects, %d errors, %.0f/s\n",
						last.Format("15:04:05"), p.Ops, p.Total, p.Errors, float64(p.Ops)/p.Elapsed.Seconds())
				}
			}
		}
	}
	res, err := s3bench.Fill(ctx, client, cfg)
	if asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "wrote %d objects (%d bytes) in %s: %.0f objects/s; %d errors\n",
			res.Objects, res.Bytes, res.Elapsed.Round(time.Millisecond), float64(res.Objects)/res.Elapsed.Seconds(), res.Errors)
		if res.FirstErr != "" {
			fmt.Fprintf(stdout, "first error: %s\n", res.FirstErr)
		}
	}
	if end := cfg.Start + cfg.Objects; res.Next < end {
		fmt.Fprintf(os.Stderr, "not all written: resume with --start %d --objects %d\n", res.Next, end-res.Next)
	}
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d PUTs failed (first: %s)", res.Errors, res.FirstErr)
	}
	return nil
}

// runBenchProbe is `regen bench probe`: HEAD, listings and DeleteObjects
// against a bucket `regen bench fill` loaded (the scale run's
// measurements of the metadata path).
func runBenchProbe(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("bench probe", "HEAD, a full recursive and a delimiter listing, and DeleteObjects against a bucket 'regen bench fill' loaded.\nGive the fill's --objects, --prefixes and --size; the deleted objects are gone afterwards.")
	cfg := s3bench.DefaultProbeConfig()
	var (
		t      s3bench.Target
		asJSON bool
	)
	targetFlags(o, &t)
	o.String(&cfg.Bucket, "bucket", "", cfg.Bucket, "the filled bucket")
	o.Int(&cfg.Objects, "objects", "", cfg.Objects, "objects in the bucket (the fill's indexes 0 to objects-1)")
	o.Int(&cfg.Prefixes, "prefixes", "", cfg.Prefixes, "the fill's prefixes")
	o.Size(&cfg.Size, "size", "", cfg.Size, "the fill's object size")
	o.Duration(&cfg.HeadDuration, "head-duration", "", cfg.HeadDuration, "how long HEAD runs")
	o.Int(&cfg.HeadConcurrency, "head-concurrency", "", cfg.HeadConcurrency, "HEADs in flight")
	o.Int(&cfg.Listings, "listings", "", cfg.Listings, "runs of each listing")
	o.Int(&cfg.DeleteKeys, "delete", "", cfg.DeleteKeys, "objects removed by DeleteObjects at the end (the last indexes; 0: none)")
	o.Bool(&asJSON, "json", "", false, "print one JSON object per workload, and no table")
	if err := o.Parse(args, cfg.Validate); err != nil {
		return err
	}
	client, err := s3bench.NewClient(t)
	if err != nil {
		return usageError{err}
	}
	cfg.OnResult = func(r s3bench.Result) {
		if asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(stdout, string(b))
		}
		fmt.Fprintf(os.Stderr, "%s\n", resultSummary(r))
	}
	results, err := s3bench.Probe(ctx, client, cfg)
	if !asJSON && len(results) > 0 {
		printS3Table(stdout, results)
	}
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Errors > 0 {
			return fmt.Errorf("%s: %d errors", r.Workload, r.Errors)
		}
	}
	return nil
}
