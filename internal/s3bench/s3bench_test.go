package s3bench

import (
	"bytes"
	"crypto/sha256"
	"io"
	"strings"
	"testing"
	"time"
)

// TestContentBodiesAndSums checks that every body reads back whole (by Read
// and by ReadAt at every offset class), that bodies differ, and that the
// digest computed from the saved prefix state is the body's SHA-256.
func TestContentBodiesAndSums(t *testing.T) {
	for _, size := range []int64{0, 1, 15, 16, 17, 100, 4 << 10, 1<<20 + 3} {
		c, err := newContent(size)
		if err != nil {
			t.Fatal(err)
		}
		var prev []byte
		for i := range 3 {
			got, err := io.ReadAll(c.body(i))
			if err != nil || int64(len(got)) != size {
				t.Fatalf("size %d body %d: %d bytes, %v", size, i, len(got), err)
			}
			if sum := sha256.Sum256(got); sum != c.sum(i) {
				t.Fatalf("size %d body %d: sum differs from the body's SHA-256", size, i)
			}
			if size > 0 && prev != nil && bytes.Equal(prev, got) {
				t.Fatalf("size %d: bodies %d and %d are equal", size, i-1, i)
			}
			prev = got
			// ReadAt across the prefix/suffix seam and past the end.
			for _, off := range []int64{0, max(size-suffixLen-3, 0), max(size-5, 0), size} {
				p := make([]byte, 8)
				n, err := c.body(i).ReadAt(p, off)
				want := got[min(off, size):min(off+8, size)]
				if !bytes.Equal(p[:n], want) || (n < 8 && err != io.EOF) {
					t.Fatalf("size %d body %d ReadAt %d: %q, %v; want %q", size, i, off, p[:n], err, want)
				}
			}
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(d, 0.5); got != 50*time.Millisecond {
		t.Errorf("p50 = %v, want 50ms", got)
	}
	if got := percentile(d, 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v, want 99ms", got)
	}
	if got := percentile(d[:1], 0.99); got != 1*time.Millisecond {
		t.Errorf("p99 of one = %v", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("p50 of none = %v", got)
	}
}

func TestRecorderResult(t *testing.T) {
	r := newRecorder()
	r.start = r.start.Add(-2 * time.Second)
	for range 10 {
		r.ok(10*time.Millisecond, 1e6, 2)
	}
	r.fail(io.ErrUnexpectedEOF)
	res := r.finish("get-1MiB", 1<<20, 8)
	if res.Ops != 10 || res.Errors != 1 || res.Bytes != 1e7 || res.Items != 20 {
		t.Fatalf("counts: %+v", res)
	}
	if res.Seconds < 2 || res.OpsPerS > 5 || res.OpsPerS < 4 || res.MBPerS > 5 || res.P50Ms != 10 || res.P99Ms != 10 {
		t.Fatalf("rates: %+v", res)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Workloads = []string{"put", "scan"} },
		func(c *Config) { c.Duration, c.Count = 0, 0 },
		func(c *Config) { c.Sizes = nil },
		func(c *Config) { c.Sizes = []int64{0} },
		func(c *Config) { c.MetaPrefixes = c.MetaObjects + 1 },
		func(c *Config) { c.PartSize = 1 << 20 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if c.Validate() == nil {
			t.Errorf("case %d: bad config accepted: %+v", i, c)
		}
	}
	c := DefaultConfig()
	if c.concurrency(4<<10) != 16 || c.concurrency(1<<20) != 8 || c.concurrency(64<<20) != 4 {
		t.Errorf("default concurrency by size: %d %d %d", c.concurrency(4<<10), c.concurrency(1<<20), c.concurrency(64<<20))
	}
	if SizeName(4<<10) != "4KiB" || SizeName(64<<20) != "64MiB" || SizeName(1000) != "1000B" {
		t.Errorf("size names: %s %s %s", SizeName(4<<10), SizeName(64<<20), SizeName(1000))
	}
}

func TestReport(t *testing.T) {
	r := func(w string, size int64, ops, mb, items, p50 float64, errs int64) Result {
		return Result{Workload: w, Size: size, OpsPerS: ops, MBPerS: mb, ItemsPerS: items, P50Ms: p50, Errors: errs}
	}
	regen := Runs{System: "regen", Rounds: [][]Result{
		{r("put-4KiB", 4096, 100, 0.4, 0, 5, 0), r("get-64MiB", 64<<20, 3, 200, 0, 900, 0), r("list-delimiter", 0, 40, 0, 2000, 25, 0)},
		{r("put-4KiB", 4096, 300, 1.2, 0, 5, 0), r("get-64MiB", 64<<20, 3, 220, 0, 900, 1), r("list-delimiter", 0, 40, 0, 2000, 20, 0)},
		{r("put-4KiB", 4096, 200, 0.8, 0, 5, 0), r("get-64MiB", 64<<20, 3, 210, 0, 900, 0), r("list-delimiter", 0, 40, 0, 2000, 30, 0)},
	}}
	other := Runs{System: "minio", Rounds: [][]Result{
		{r("put-4KiB", 4096, 100, 0.4, 0, 5, 0), r("get-64MiB", 64<<20, 3, 420, 0, 900, 0), r("list-delimiter", 0, 40, 0, 2000, 10, 0)},
	}}
	var b strings.Builder
	Report(&b, []Runs{regen, other})
	out := b.String()
	for _, want := range []string{
		"| put-4KiB | ops/s | 200 | 100 (2.00×) |",
		"| get-64MiB | MB/s | 210 (1 errors) | 420 (0.50×) |",
		"| list-delimiter | ms (p50) | 25.0 | 10.0 (0.40×) |",
		"3 rounds of regen, 1 rounds of minio",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if Median([]float64{4, 1, 3, 2}) != 2.5 || Median(nil) != 0 {
		t.Error("median")
	}
}

func TestLowWater(t *testing.T) {
	w := newLowWater(10)
	for _, i := range []int{12, 11, 14} {
		w.mark(i)
	}
	if got := w.next(); got != 10 {
		t.Fatalf("next = %d with 10 not done, want 10", got)
	}
	w.mark(10)
	if got := w.next(); got != 13 {
		t.Fatalf("next = %d after 10-12 and 14, want 13", got)
	}
	w.mark(13)
	w.mark(3) // below the start: ignored
	if got := w.next(); got != 15 {
		t.Fatalf("next = %d after 10-14, want 15", got)
	}
}

func TestFillKeySpreadsAndSorts(t *testing.T) {
	seen := map[string]bool{}
	for i := range 10 {
		seen[FillKey(i, 5)[:5]] = true
	}
	if len(seen) != 5 {
		t.Fatalf("10 consecutive indexes over 5 prefixes hit %d prefixes, want 5", len(seen))
	}
	if a, b := FillKey(7, 5), FillKey(12, 5); a[:5] != b[:5] || a >= b {
		t.Fatalf("keys of one prefix must sort by index: %q, %q", a, b)
	}
}

func TestFillConfigValidate(t *testing.T) {
	if err := DefaultFillConfig().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for name, mod := range map[string]func(*FillConfig){
		"no bucket":      func(c *FillConfig) { c.Bucket = "" },
		"no objects":     func(c *FillConfig) { c.Objects = 0 },
		"negative start": func(c *FillConfig) { c.Start = -1 },
		"no prefixes":    func(c *FillConfig) { c.Prefixes = 0 },
		"no workers":     func(c *FillConfig) { c.Concurrency = 0 },
	} {
		c := DefaultFillConfig()
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestProbeConfigValidate(t *testing.T) {
	if err := DefaultProbeConfig().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	c := DefaultProbeConfig()
	c.DeleteKeys = c.Objects + 1
	if c.Validate() == nil {
		t.Fatal("deleting more keys than were filled was accepted")
	}
}
