package s3bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
)

// FillConfig configures Fill: a bulk load of many small objects through
// the S3 API, for scale runs (issue 18: a million objects of 1 KiB in a
// thousand prefixes), which no timed workload can set up.
type FillConfig struct {
	// Bucket receives the objects; it is made when missing and never
	// emptied or removed (the objects are what a scale run measures).
	Bucket string
	// Objects is how many objects to write, with indexes Start to
	// Start+Objects-1 (default 1,000,000).
	Objects int
	// Start is the first index: a load stopped at index i resumes with
	// Start = i (rewriting an object is harmless; the keys and bodies of
	// an index are always the same).
	Start int
	// Prefixes spreads the objects: object i is FillKey(i, Prefixes)
	// (default 1000).
	Prefixes int
	// Size of each object (default 1 KiB).
	Size int64
	// Concurrency of the PUTs (default 32).
	Concurrency int
	// OnProgress, if set, is called a few times a second.
	OnProgress func(Progress)
}

// DefaultFillConfig returns the load issue 18's scale run asks for.
func DefaultFillConfig() FillConfig {
	return FillConfig{Bucket: "scale", Objects: 1_000_000, Prefixes: 1000, Size: 1 << 10, Concurrency: 32}
}

// Validate reports the first field out of range.
func (c FillConfig) Validate() error {
	switch {
	case c.Bucket == "":
		return errors.New("s3bench: fill: a bucket is needed")
	case c.Objects < 1:
		return fmt.Errorf("s3bench: fill: objects %d: at least 1", c.Objects)
	case c.Start < 0:
		return fmt.Errorf("s3bench: fill: start %d: not negative", c.Start)
	case c.Prefixes < 1:
		return fmt.Errorf("s3bench: fill: prefixes %d: at least 1", c.Prefixes)
	case c.Size < 0:
		return fmt.Errorf("s3bench: fill: size %d: not negative", c.Size)
	case c.Concurrency < 1:
		return fmt.Errorf("s3bench: fill: concurrency %d: at least 1", c.Concurrency)
	}
	return nil
}

// FillKey is the key of object i of a fill over prefixes prefixes:
// consecutive indexes go to different prefixes, so any stretch of a load
// fills every prefix evenly, and keys sort by index within a prefix.
func FillKey(i, prefixes int) string {
	return fmt.Sprintf("p%04d/o%09d", i%prefixes, i)
}

// FillResult sums up a Fill.
type FillResult struct {
	Objects int64         `json:"objects"` // written
	Errors  int64         `json:"errors"`  // failed PUTs (each tried up to 3 times)
	Bytes   int64         `json:"bytes"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// Next is the first index not known to be written: where a new
	// Fill resumes (Start of the next run) after ctx ended.
	Next int `json:"next"`
	// FirstErr is the first PUT error, if any.
	FirstErr string `json:"first_error,omitempty"`
}

// Fill writes cfg.Objects objects and returns what it did; it stops early
// when ctx ends. A PUT that fails is tried twice more before it counts as
// an error: a long load should survive a brief 503 from a busy cluster.
func Fill(ctx context.Context, c *minio.Client, cfg FillConfig) (FillResult, error) {
	if err := cfg.Validate(); err != nil {
		return FillResult{}, err
	}
	ok, err := c.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return FillResult{}, fmt.Errorf("s3bench: fill: bucket %s: %w", cfg.Bucket, err)
	}
	if !ok {
		if err := c.MakeBucket(ctx, cfg.Bucket, minio.MakeBucketOptions{}); err != nil {
			return FillResult{}, fmt.Errorf("s3bench: fill: make bucket %s: %w", cfg.Bucket, err)
		}
	}
	ct, err := newContent(cfg.Size)
	if err != nil {
		return FillResult{}, err
	}
	r := &runner{c: c, cfg: Config{OnProgress: cfg.OnProgress}}
	rec := newRecorder()
	done := newLowWater(cfg.Start)
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
	r.workers(ctx, "fill", cfg.Concurrency, cfg.Objects, 0, rec, func(ctx context.Context, seq int64) {
		i := cfg.Start + int(seq)
		key := FillKey(i, cfg.Prefixes)
		var err error
		for try := range 3 {
			if try > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(try) * time.Second):
				}
			}
			t0 := time.Now()
			if _, err = c.PutObject(ctx, cfg.Bucket, key, ct.body(i), ct.size, opts); err == nil {
				rec.ok(time.Since(t0), ct.size, 1)
				done.mark(i)
				return
			}
			if ctx.Err() != nil {
				return
			}
		}
		rec.fail(err)
	})
	ops, errs, bytes, _, el := rec.snapshot()
	res := FillResult{Objects: ops, Errors: errs, Bytes: bytes, Elapsed: el, Next: done.next()}
	if rec.first != nil {
		res.FirstErr = rec.first.Error()
	}
	return res, ctx.Err()
}

// lowWater tracks which indexes are done, in any order, and the first
// one that is not.
type lowWater struct {
	mu    sync.Mutex
	low   int          // every index below is done
	above map[int]bool // done indexes above low
}

func newLowWater(start int) *lowWater { return &lowWater{low: start, above: map[int]bool{}} }

func (w *lowWater) mark(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i < w.low {
		return
	}
	w.above[i] = true
	for w.above[w.low] {
		delete(w.above, w.low)
		w.low++
	}
}

func (w *lowWater) next() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.low
}
