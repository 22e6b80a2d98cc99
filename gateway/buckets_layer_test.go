package gateway

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/metadata"
)

// fakeBucketStore serves bucket records from every server alike, counts
// the list calls, and can hold them until gate is closed.
type fakeBucketStore struct {
	ShardAPI

	mu      sync.Mutex
	buckets []metadata.Bucket
	lists   int
	gate    chan struct{}
	started chan struct{} // gets a value as each list call starts, when set
}

func (f *fakeBucketStore) ListBuckets(ctx context.Context, addr string) ([]metadata.Bucket, error) {
	f.mu.Lock()
	f.lists++
	gate, started, out := f.gate, f.started, append([]metadata.Bucket(nil), f.buckets...)
	f.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, nil
}

func bucketLayer(servers int, f *fakeBucketStore) *layer {
	return &layer{shards: f, nodes: liveShards(servers, "s%d"), clock: clock{writer: "gw"}}
}

// Requests that find the cache stale at once share one read of the
// servers instead of each asking all of them.
func TestBucketCacheReadsOnceForConcurrentMisses(t *testing.T) {
	const servers, requests = 12, 64
	f := &fakeBucketStore{buckets: []metadata.Bucket{{Name: "b", Version: metadata.Version{TS: 1, Writer: "gw"}}},
		gate: make(chan struct{}), started: make(chan struct{}, servers*requests)}
	l := bucketLayer(servers, f)
	cache := &bucketCache{ttl: time.Hour}

	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.bucket(context.Background(), cache, "b"); err != nil {
				errs <- err
			}
		}()
	}
	// Let the first read reach the servers, give the others time to
	// queue behind it, then let it answer.
	for range servers {
		<-f.started
	}
	time.Sleep(50 * time.Millisecond)
	close(f.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if f.lists != servers {
		t.Fatalf("%d concurrent misses made %d list calls, want one read of %d servers", requests, f.lists, servers)
	}
}

// A read that started before an invalidation (a bucket written by this
// gateway meanwhile) is not cached, and requests after the invalidation
// do not join it.
func TestBucketCacheReadBeforeInvalidateNotKept(t *testing.T) {
	const servers = 3
	oldGate := make(chan struct{})
	f := &fakeBucketStore{gate: oldGate, started: make(chan struct{}, 100)}
	l := bucketLayer(servers, f)
	cache := &bucketCache{ttl: time.Hour}

	first := make(chan error, 1)
	go func() {
		_, err := l.allBuckets(context.Background(), cache)
		first <- err
	}()
	for range servers {
		<-f.started
	}
	// The bucket is written and the cache invalidated while that read is
	// out.
	f.mu.Lock()
	f.buckets = []metadata.Bucket{{Name: "new", Version: metadata.Version{TS: 2, Writer: "gw"}}}
	f.gate = nil
	f.mu.Unlock()
	cache.invalidate()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := l.allBuckets(ctx, cache)
	if err != nil {
		t.Fatalf("a request after the invalidation: %v (did it wait for the read started before?)", err)
	}
	if _, ok := got["new"]; !ok {
		t.Fatalf("a request after the invalidation got %v, want the new bucket", got)
	}
	close(oldGate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	got, err = l.allBuckets(ctx, cache)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["new"]; !ok {
		t.Fatalf("after the older read ended the cache holds %v: the read started before the invalidation replaced the newer one", got)
	}
}
