package s3bench

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Result is one measured workload: one JSON object of `regen bench s3
// --json`.
type Result struct {
	// Workload names what ran: put-4KiB, get-1MiB, head, list-recursive,
	// list-delimiter, list-prefix, delete-objects.
	Workload    string `json:"workload"`
	Size        int64  `json:"size,omitempty"` // object size, for PUT/GET/HEAD
	Concurrency int    `json:"concurrency"`
	// Ops counts requests that succeeded (a listing of many pages or a
	// DeleteObjects batch is one op); Errors the ones that failed,
	// verification failures of GETs included.
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
	// Items counts objects listed or keys deleted (0 for other workloads).
	Items   int64   `json:"items,omitempty"`
	Bytes   int64   `json:"bytes"` // object bytes moved by successful ops
	Seconds float64 `json:"seconds"`
	// OpsPerS, MBPerS (10^6 bytes) and ItemsPerS are over Seconds.
	OpsPerS   float64 `json:"ops_per_s"`
	MBPerS    float64 `json:"mb_per_s,omitempty"`
	ItemsPerS float64 `json:"items_per_s,omitempty"`
	// P50Ms and P99Ms are latencies of successful ops, first request
	// byte to last response byte (GETs: read and hashed).
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// recorder collects the outcomes of a workload's ops from many workers.
type recorder struct {
	mu     sync.Mutex
	lat    []time.Duration
	ops    int64
	errs   int64
	items  int64
	bytes  int64
	first  error // the first error, for the report
	start  time.Time
	stop   time.Time
	closed bool
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

// ok records a successful op of d that moved bytes and covered items.
func (r *recorder) ok(d time.Duration, bytes, items int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lat = append(r.lat, d)
	r.ops++
	r.bytes += bytes
	r.items += items
}

// fail records a failed op.
func (r *recorder) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs++
	if r.first == nil {
		r.first = err
	}
}

// snapshot returns the counts so far (for the progress line).
func (r *recorder) snapshot() (ops, errs, bytes, items int64, elapsed time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := time.Now()
	if r.closed {
		end = r.stop
	}
	return r.ops, r.errs, r.bytes, r.items, end.Sub(r.start)
}

// finish stops the clock and returns the workload's result.
func (r *recorder) finish(name string, size int64, conc int) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.stop, r.closed = time.Now(), true
	}
	secs := r.stop.Sub(r.start).Seconds()
	res := Result{Workload: name, Size: size, Concurrency: conc, Ops: r.ops, Errors: r.errs, Items: r.items, Bytes: r.bytes, Seconds: round(secs, 3)}
	if secs > 0 {
		res.OpsPerS = round(float64(r.ops)/secs, 2)
		res.MBPerS = round(float64(r.bytes)/1e6/secs, 2)
		res.ItemsPerS = round(float64(r.items)/secs, 2)
	}
	res.P50Ms = round(ms(percentile(r.lat, 0.50)), 3)
	res.P99Ms = round(ms(percentile(r.lat, 0.99)), 3)
	return res
}

// percentile returns the q-quantile of d (nearest rank; 0 for none). It
// sorts d.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}
