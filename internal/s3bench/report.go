package s3bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Metric is how a workload is compared between systems.
type Metric struct {
	Name string // as the table heads it: MB/s, ops/s, objects/s, keys/s, ms
	// LowerBetter is set for latencies; their ratio is other ÷ this, so
	// that every ratio above 1 means the first system is faster.
	LowerBetter bool
	Of          func(Result) float64
}

// MetricOf picks the figure a workload is judged by: throughput for
// objects of 64 KiB and more, ops/s below, objects/s for a recursive
// listing, keys/s for DeleteObjects, and the median latency for the
// short listings (delimiter, prefix), which are single requests.
func MetricOf(workload string, size int64) Metric {
	switch {
	case workload == "list-recursive":
		return Metric{Name: "objects/s", Of: func(r Result) float64 { return r.ItemsPerS }}
	case workload == "delete-objects":
		return Metric{Name: "keys/s", Of: func(r Result) float64 { return r.ItemsPerS }}
	case strings.HasPrefix(workload, "list-"):
		return Metric{Name: "ms (p50)", LowerBetter: true, Of: func(r Result) float64 { return r.P50Ms }}
	case size >= 64<<10 && workload != Head:
		return Metric{Name: "MB/s", Of: func(r Result) float64 { return r.MBPerS }}
	}
	return Metric{Name: "ops/s", Of: func(r Result) float64 { return r.OpsPerS }}
}

// Runs is what one system measured: one []Result per round.
type Runs struct {
	System string
	Rounds [][]Result
}

// Report writes a markdown table: for each workload, the median over
// rounds of each system's figure, and for every system after the first
// the ratio first ÷ that system (latencies inverted, so > 1 is always
// "the first system is faster"). Errors over all rounds are noted beside
// a figure.
func Report(w io.Writer, systems []Runs) {
	if len(systems) == 0 {
		return
	}
	var order []string
	sizes := map[string]int64{}
	for _, s := range systems {
		for _, round := range s.Rounds {
			for _, r := range round {
				if !slices.Contains(order, r.Workload) {
					order = append(order, r.Workload)
				}
				sizes[r.Workload] = r.Size
			}
		}
	}
	base := systems[0]
	head := "| workload | metric | " + base.System
	sep := "| --- | --- | ---"
	for _, s := range systems[1:] {
		head += fmt.Sprintf(" | %s (%s ÷ it)", s.System, base.System)
		sep += " | ---"
	}
	fmt.Fprintln(w, head+" |")
	fmt.Fprintln(w, sep+" |")
	for _, wl := range order {
		m := MetricOf(wl, sizes[wl])
		bv, bn, berrs := summarize(base, wl, m)
		row := fmt.Sprintf("| %s | %s | %s", wl, m.Name, cell(bv, bn, berrs))
		for _, s := range systems[1:] {
			v, n, errs := summarize(s, wl, m)
			c := cell(v, n, errs)
			if bn > 0 && n > 0 && v > 0 && bv > 0 {
				ratio := bv / v
				if m.LowerBetter {
					ratio = v / bv
				}
				c += fmt.Sprintf(" (%.2f×)", ratio)
			}
			row += " | " + c
		}
		fmt.Fprintln(w, row+" |")
	}
	fmt.Fprintf(w, "\nMedians of %s; ratios above 1 mean %s is faster.\n", roundsNote(systems), base.System)
}

// summarize returns the median of the workload's figure over s's rounds,
// how many rounds had it, and the errors they counted.
func summarize(s Runs, workload string, m Metric) (median float64, n int, errs int64) {
	var v []float64
	for _, round := range s.Rounds {
		for _, r := range round {
			if r.Workload == workload {
				v = append(v, m.Of(r))
				errs += r.Errors
			}
		}
	}
	return Median(v), len(v), errs
}

// Median of v (0 for none); the mean of the middle two for an even count.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func cell(v float64, n int, errs int64) string {
	if n == 0 {
		return "-"
	}
	var c string
	switch {
	case v >= 100:
		c = fmt.Sprintf("%.0f", v)
	case v >= 10:
		c = fmt.Sprintf("%.1f", v)
	default:
		c = fmt.Sprintf("%.2f", v)
	}
	if errs > 0 {
		c += fmt.Sprintf(" (%d errors)", errs)
	}
	return c
}

func roundsNote(systems []Runs) string {
	var parts []string
	for _, s := range systems {
		parts = append(parts, fmt.Sprintf("%d rounds of %s", len(s.Rounds), s.System))
	}
	return strings.Join(parts, ", ")
}
