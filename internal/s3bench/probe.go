package s3bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/minio/minio-go/v7"
)

// ProbeConfig configures Probe: the metadata operations of issue 18's
// scale run, against a bucket that Fill loaded (the same Objects,
// Prefixes and Size).
type ProbeConfig struct {
	Bucket   string
	Objects  int   // objects the fill wrote (indexes 0 to Objects-1)
	Prefixes int   // the fill's prefixes
	Size     int64 // the fill's object size: every HEAD checks it
	// HeadDuration bounds the HEAD workload (default 20 s) at
	// HeadConcurrency (default 16), on objects picked at random.
	HeadDuration    time.Duration
	HeadConcurrency int
	// Listings is how many times each listing runs (default 3): the
	// recursive one lists the whole bucket, the delimiter one its
	// Prefixes common prefixes.
	Listings int
	// DeleteKeys is how many objects DeleteObjects removes at the end,
	// the last indexes of the fill (default 10,000; 0: none). They are
	// removed for good: a later probe must be told Objects less.
	DeleteKeys int
	OnProgress func(Progress)
	OnResult   func(Result)
}

// DefaultProbeConfig matches DefaultFillConfig.
func DefaultProbeConfig() ProbeConfig {
	f := DefaultFillConfig()
	return ProbeConfig{Bucket: f.Bucket, Objects: f.Objects, Prefixes: f.Prefixes, Size: f.Size,
		HeadDuration: 20 * time.Second, HeadConcurrency: 16, Listings: 3, DeleteKeys: 10_000}
}

// Validate reports the first field out of range.
func (c ProbeConfig) Validate() error {
	switch {
	case c.Bucket == "":
		return fmt.Errorf("s3bench: probe: a bucket is needed")
	case c.Objects < 1 || c.Prefixes < 1:
		return fmt.Errorf("s3bench: probe: objects %d and prefixes %d: at least 1 each", c.Objects, c.Prefixes)
	case c.HeadDuration <= 0 || c.HeadConcurrency < 1:
		return fmt.Errorf("s3bench: probe: HEAD for %s at concurrency %d: both must be positive", c.HeadDuration, c.HeadConcurrency)
	case c.Listings < 1:
		return fmt.Errorf("s3bench: probe: listings %d: at least 1", c.Listings)
	case c.DeleteKeys < 0 || c.DeleteKeys > c.Objects:
		return fmt.Errorf("s3bench: probe: delete %d keys of %d", c.DeleteKeys, c.Objects)
	}
	return nil
}

// Probe runs, in this order, HEAD of random objects, a full recursive
// listing, a delimiter listing of the root, and DeleteObjects of the
// last DeleteKeys objects; every answer is checked (sizes, entry
// counts, and that deleted keys are gone from HEAD).
func Probe(ctx context.Context, c *minio.Client, cfg ProbeConfig) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{c: c, cfg: Config{Bucket: cfg.Bucket, OnProgress: cfg.OnProgress}}
	var results []Result
	emit := func(res Result) {
		results = append(results, res)
		if cfg.OnResult != nil {
			cfg.OnResult(res)
		}
	}

	rec := newRecorder()
	r.workers(ctx, Head, cfg.HeadConcurrency, 0, cfg.HeadDuration, rec, func(ctx context.Context, _ int64) {
		key := FillKey(rand.IntN(cfg.Objects), cfg.Prefixes)
		t0 := time.Now()
		info, err := c.StatObject(ctx, cfg.Bucket, key, minio.StatObjectOptions{})
		switch {
		case err != nil:
			rec.fail(fmt.Errorf("s3bench: HEAD %s: %w", key, err))
		case info.Size != cfg.Size:
			rec.fail(fmt.Errorf("s3bench: HEAD %s: size %d, want %d", key, info.Size, cfg.Size))
		default:
			rec.ok(time.Since(t0), 0, 0)
		}
	})
	emit(rec.finish(Head, cfg.Size, cfg.HeadConcurrency))
	if ctx.Err() != nil {
		return results, ctx.Err()
	}

	r.cfg.Count = cfg.Listings
	for _, l := range []listing{
		{"list-recursive", minio.ListObjectsOptions{Recursive: true}, cfg.Objects},
		{"list-delimiter", minio.ListObjectsOptions{}, min(cfg.Prefixes, cfg.Objects)},
	} {
		emit(r.list(ctx, l))
		if ctx.Err() != nil {
			return results, ctx.Err()
		}
	}

	if cfg.DeleteKeys == 0 {
		return results, nil
	}
	keys := make([]string, 0, cfg.DeleteKeys)
	for i := cfg.Objects - cfg.DeleteKeys; i < cfg.Objects; i++ {
		keys = append(keys, FillKey(i, cfg.Prefixes))
	}
	rec = newRecorder()
	stop := r.watch("delete-objects", rec, int64((len(keys)+999)/1000), 0)
	_ = r.removeKeys(ctx, keys, func(d time.Duration, n int, err error) {
		if err != nil {
			rec.fail(err)
			return
		}
		rec.ok(d, 0, int64(n))
	})
	res := rec.finish("delete-objects", 0, 1)
	stop()
	// A few of the deleted keys must be gone.
	for _, i := range []int{0, len(keys) / 2, len(keys) - 1} {
		if _, err := c.StatObject(ctx, cfg.Bucket, keys[i], minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
			res.Errors++
		}
	}
	emit(res)
	return results, ctx.Err()
}
