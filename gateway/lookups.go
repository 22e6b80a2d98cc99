package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// lookups sends the manifest lookups of concurrent requests to one shard
// server together, as group commit does for writes: a lookup that finds
// no call of this gateway in flight to its server goes at once, alone;
// those that arrive while one is in flight wait for it to end and then go
// in one batched call per bucket (shardrpc.PathManifestVersionsBatch).
// Nothing waits at low load; under load a HEAD or GET costs each server a
// share of a call instead of a call of its own (the HTTP round trip, its
// signature and its goroutines are most of what a lookup costs).
//
// A batched answer is read by the server after every lookup in it was
// asked and before any is answered, so each lookup still takes effect
// within its own request. Lookups are for versions without inline data;
// the one lookup of a GET that fetches the data goes alone.
type lookups struct {
	shards ShardAPI
	// timeout bounds a batched call when none of its lookups has a
	// deadline.
	timeout time.Duration

	mu     sync.Mutex
	queues map[string]*lookupQueue // by server address
}

type lookupQueue struct {
	busy    bool // a call to the server is in flight
	pending []*lookupReq
}

type lookupReq struct {
	ctx         context.Context
	bucket, key string
	done        chan lookupResult // buffered: the sender never blocks
}

type lookupResult struct {
	res shardrpc.ManifestVersionsResponse
	err error
}

func newLookups(shards ShardAPI, timeout time.Duration) *lookups {
	return &lookups{shards: shards, timeout: timeout, queues: map[string]*lookupQueue{}}
}

// lookup is ShardAPI.LookupVersions without inline data, batched with the
// lookups of other requests to addr while a call to it is in flight.
func (b *lookups) lookup(ctx context.Context, addr, bucket, key string) (shardrpc.ManifestVersionsResponse, error) {
	b.mu.Lock()
	q := b.queues[addr]
	if q == nil {
		q = &lookupQueue{}
		b.queues[addr] = q
	}
	if q.busy {
		r := &lookupReq{ctx: ctx, bucket: bucket, key: key, done: make(chan lookupResult, 1)}
		q.pending = append(q.pending, r)
		b.mu.Unlock()
		select {
		case out := <-r.done:
			return out.res, out.err
		case <-ctx.Done():
			return shardrpc.ManifestVersionsResponse{}, ctx.Err()
		}
	}
	q.busy = true
	b.mu.Unlock()
	res, err := b.shards.LookupVersions(ctx, addr, bucket, key, false)
	go b.drain(addr, q)
	return res, err
}

// drain sends the lookups that queued for addr, a batch at a time, until
// none is left; then the next lookup goes alone again.
func (b *lookups) drain(addr string, q *lookupQueue) {
	for {
		b.mu.Lock()
		var batch []*lookupReq
		for _, r := range q.pending {
			if r.ctx.Err() == nil { // its request has given up
				batch = append(batch, r)
			}
		}
		q.pending = nil
		if len(batch) == 0 {
			q.busy = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.send(addr, batch)
	}
}

// send asks addr for the lookups of batch, one call per bucket and
// MaxBatch keys, and hands each its answer.
func (b *lookups) send(addr string, batch []*lookupReq) {
	byBucket := map[string][]*lookupReq{}
	for _, r := range batch {
		byBucket[r.bucket] = append(byBucket[r.bucket], r)
	}
	for bucket, rs := range byBucket {
		for len(rs) > 0 {
			chunk := rs[:min(len(rs), shardrpc.MaxBatch)]
			rs = rs[len(chunk):]
			b.sendChunk(addr, bucket, chunk)
		}
	}
}

func (b *lookups) sendChunk(addr, bucket string, chunk []*lookupReq) {
	if len(chunk) == 1 {
		r := chunk[0]
		res, err := b.shards.LookupVersions(r.ctx, addr, bucket, r.key, false)
		r.done <- lookupResult{res, err}
		return
	}
	// NB: the call lives as long as the latest of its lookups may wait;
	// a request that gives up earlier stops waiting on its own.
	var deadline time.Time
	keys := make([]string, len(chunk))
	for i, r := range chunk {
		keys[i] = r.key
		d, ok := r.ctx.Deadline()
		if !ok {
			d = time.Now().Add(b.timeout)
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	answers, err := b.shards.GetManifestVersionsBatch(ctx, addr, bucket, keys)
	for i, r := range chunk {
		r.done <- keyAnswer(addr, bucket, r.key, answers, i, err)
	}
}

// keyAnswer turns answer i of a batched lookup into LookupVersions' result.
func keyAnswer(addr, bucket, key string, answers []shardrpc.KeyVersions, i int, err error) lookupResult {
	switch {
	case err != nil:
		return lookupResult{err: err}
	case answers[i].Err != "":
		return lookupResult{err: fmt.Errorf("node %s: %s/%s: %s", addr, bucket, key, answers[i].Err)}
	case answers[i].Current == nil:
		return lookupResult{err: fmt.Errorf("node %s: %s/%s: %w", addr, bucket, key, shardrpc.ErrNotFound)}
	}
	return lookupResult{res: shardrpc.ManifestVersionsResponse{Current: answers[i].Current, Previous: answers[i].Previous, Committed: answers[i].Committed}}
}
