package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/metadata"
)

// Bucket records live on every shard server. Writes go to all live servers
// and need a majority of them; reads merge every live server's records,
// newest version per bucket wins, so a server that missed a write is
// outvoted by one that saw it.

// bucketCache caches the merged bucket list for a short TTL: every object
// request checks its bucket, and asking all servers each time would double
// the request count. Requests that find it stale share one read: under
// load every request in flight missed at once when the TTL ran out, and
// each asked all servers (a fill at concurrency 64 made one bucket-list
// call per PUT).
type bucketCache struct {
	ttl time.Duration
	mu  struct {
		sync.Mutex
		at      time.Time
		buckets map[string]metadata.Bucket
		// gen counts invalidations. A read stores its result only if no
		// invalidation came after it started (a bucket written meanwhile
		// would be missing from it), and a request joins only a read
		// started since the last one.
		gen    uint64
		flight *bucketRead
	}
}

// bucketRead is one read of every server's bucket records, shared by the
// requests that wait for it.
type bucketRead struct {
	gen     uint64
	done    chan struct{}
	buckets map[string]metadata.Bucket
	err     error
}

// age is how long ago the cached list was read; large when there is none.
func (c *bucketCache) age() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.buckets == nil {
		return time.Duration(1<<63 - 1)
	}
	return time.Since(c.mu.at)
}

func (c *bucketCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.buckets = nil
	c.mu.gen++
}

// allBuckets returns the newest record of every bucket, tombstones
// included, merged over the live shard servers.
func (l *layer) allBuckets(ctx context.Context, cache *bucketCache) (map[string]metadata.Bucket, error) {
	for {
		cache.mu.Lock()
		if b := cache.mu.buckets; b != nil && time.Since(cache.mu.at) <= cache.ttl {
			cache.mu.Unlock()
			return b, nil
		}
		if f := cache.mu.flight; f != nil && f.gen == cache.mu.gen {
			cache.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.err != nil && ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
				continue // the request that read gave up, not this one
			}
			return f.buckets, f.err
		}
		f := &bucketRead{gen: cache.mu.gen, done: make(chan struct{})}
		cache.mu.flight = f
		cache.mu.Unlock()

		f.buckets, f.err = mergeNewest(ctx, l, "buckets", l.shards.ListBuckets, func(b metadata.Bucket) (string, metadata.Version) { return b.Name, b.Version })
		cache.mu.Lock()
		if f.err == nil && cache.mu.gen == f.gen {
			cache.mu.buckets, cache.mu.at = f.buckets, time.Now()
		}
		if cache.mu.flight == f {
			cache.mu.flight = nil
		}
		cache.mu.Unlock()
		close(f.done)
		return f.buckets, f.err
	}
}

// bucket returns the live bucket record or errNotFound.
func (l *layer) bucket(ctx context.Context, cache *bucketCache, name string) (metadata.Bucket, error) {
	all, err := l.allBuckets(ctx, cache)
	if err != nil {
		return metadata.Bucket{}, err
	}
	b, ok := all[name]
	if !ok || b.Deleted {
		// A bucket created through another gateway within the cache TTL
		// is not in our cached view; look once more before saying no.
		cache.invalidate()
		all, err = l.allBuckets(ctx, cache)
		if err != nil {
			return metadata.Bucket{}, err
		}
		if b, ok = all[name]; !ok || b.Deleted {
			return metadata.Bucket{}, errNotFound
		}
	}
	return b, nil
}

// listBuckets returns the live buckets sorted by name.
func (l *layer) listBuckets(ctx context.Context, cache *bucketCache) ([]metadata.Bucket, error) {
	cache.invalidate()
	all, err := l.allBuckets(ctx, cache)
	if err != nil {
		return nil, err
	}
	var out []metadata.Bucket
	for _, b := range all {
		if !b.Deleted {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b metadata.Bucket) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// putBucket writes a bucket record to every live shard server and needs a
// majority of them.
func (l *layer) putBucket(ctx context.Context, cache *bucketCache, b *metadata.Bucket) error {
	defer cache.invalidate()
	ids, _ := l.liveShards()
	ok, errs := l.onLive(ids, func(_, addr string) error { return l.shards.PutBucket(ctx, addr, b) })
	if need := len(ids)/2 + 1; ok < need || len(ids) == 0 {
		return fmt.Errorf("%w: bucket record stored on %d of %d servers: %w", errUnavailable, ok, len(ids), errors.Join(errs...))
	}
	return nil
}

// mergeNewest lists records (buckets, access keys) on every live shard
// server and keeps the newest version of each name; a majority of the
// live servers must answer, or the answer could miss a change.
func mergeNewest[T any](ctx context.Context, l *layer, what string, list func(ctx context.Context, addr string) ([]T, error), id func(T) (string, metadata.Version)) (map[string]T, error) {
	ids, addrs := l.liveShards()
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no live shard servers", errUnavailable)
	}
	var mu sync.Mutex
	merged := map[string]T{}
	newest := map[string]metadata.Version{}
	answered := 0
	var errs []error
	var g errgroup.Group
	for _, node := range ids {
		g.Go(func() error {
			recs, err := list(ctx, addrs[node])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", node, err))
				return nil
			}
			answered++
			for _, r := range recs {
				name, v := id(r)
				if cur, ok := newest[name]; !ok || cur.Less(v) {
					merged[name], newest[name] = r, v
				}
			}
			return nil
		})
	}
	g.Wait()
	if answered < len(ids)/2+1 {
		return nil, fmt.Errorf("%w: %d of %d servers answered for %s: %w", errUnavailable, answered, len(ids), what, errors.Join(errs...))
	}
	return merged, nil
}
