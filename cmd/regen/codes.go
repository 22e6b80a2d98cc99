package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/regen-s3/regen/codec"
)

// runCodes implements `regen codes`: for a code, enumerate (or sample) every
// failure pattern of each requested size, execute its repair plan on random
// data, verify the rebuilt bytes and report the measured bandwidth.
func runCodes(ctx context.Context, args []string, stdout io.Writer) error {
	o := newOptionSet("codes", "Survey the repair bandwidth of an erasure code: every failure pattern's repair runs on random data and is verified.")
	var name, failures string
	var sample int
	var chunk int64
	var seed int
	var asJSON bool
	o.String(&name, "code", "", "clay-10-10", "code name: rs-K-M, clay-K-M or pm-K-M")
	o.String(&failures, "failures", "", "1,2,3,4", "comma-separated failure counts t")
	o.Int(&sample, "sample", "", 0, "patterns per t when there are more (0 = all)")
	o.Int(&seed, "seed", "", 1, "seed for data and pattern sampling")
	o.Bool(&asJSON, "json", "", false, "print one JSON object per t")
	o.Size(&chunk, "chunk", "", 0, "shard chunk per stripe, e.g. 64KiB (0 = 64 bytes per sub-chunk)")
	if err := o.Parse(args, func() error {
		if chunk > 1<<30 {
			return badOption("chunk", "want at most 1GiB")
		}
		return nil
	}); err != nil {
		return err
	}
	c, err := codec.Parse(name)
	if err != nil {
		return err
	}
	rc, ok := c.(codec.Regenerating)
	if !ok {
		return fmt.Errorf("codes: %s has no repair planner", c.Name())
	}
	ts, err := parseInts(failures)
	if err != nil {
		return err
	}
	var valid []int
	for _, t := range ts {
		if t <= c.ParityShards() {
			valid = append(valid, t)
		}
	}
	if len(valid) == 0 {
		return fmt.Errorf("codes: %s tolerates at most %d failures", c.Name(), c.ParityShards())
	}
	rows, err := codec.Survey(ctx, rc, codec.SurveyOptions{Failures: valid, Sample: sample, Seed: int64(seed), Chunk: int(chunk)})
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(stdout, "%s: n=%d k=%d alpha=%d (bandwidth as a fraction of the stripe data M; every plan executed and verified)\n",
		c.Name(), c.TotalShards(), c.DataShards(), c.SubChunks())
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "t\tpatterns\tbad\tmean\tmax\tbound\tRS\tmethods\t")
	for _, r := range rows {
		pats := strconv.Itoa(r.Patterns)
		if r.Patterns < r.Total {
			pats = fmt.Sprintf("%d/%d", r.Patterns, r.Total)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.3f\t%.3f\t%.3f\t%.1f\t%s\t\n", r.T, pats, r.Bad, r.MeanRatio, r.MaxRatio, r.Bound, r.RS, methods(r.Methods))
	}
	for _, t := range ts {
		if t > c.ParityShards() {
			fmt.Fprintf(tw, "%d\tn/a (t > n-k)\t\t\t\t\t\t\t\n", t)
		}
	}
	return tw.Flush()
}

func methods(m map[string]int) string {
	var parts []string
	for _, k := range []string{codec.MethodMSR, codec.MethodCORE, codec.MethodVirtual, codec.MethodAugmented, codec.MethodConventional} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
		}
	}
	return strings.Join(parts, " ")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, errors.Join(fmt.Errorf("codes: bad failure count %q", f), err)
		}
		out = append(out, v)
	}
	return out, nil
}
