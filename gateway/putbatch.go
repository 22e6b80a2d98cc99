package gateway

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// manifestWrites sends the manifest writes of concurrent requests to one
// shard server together, as lookups does for lookups: a write that finds
// no write of this gateway in flight to its server (with the same lease
// fence) goes at once, alone; those that arrive while one is in flight
// wait for it to end and then go in one batched call
// (shardrpc.PathManifestsBatch), up to shardrpc.MaxBatch a call. Nothing
// waits at low load, and no timer ever holds a write back for company;
// under load a small PUT costs each of its servers a share of a call
// instead of a call of its own (the HTTP round trip, its signature, its
// goroutines and its sync are most of what a manifest write costs).
//
// Each write still gets its own result, with what a single call answers
// (stored, the key's current version, whether it replaced one), and the
// server stores each manifest of a batch as it stores a single one: fenced
// by the same lease, durable before the answer. A batched call that fails
// fails only the writes it carried, as a failed single call would: each
// counts that server as not stored, and its request decides on its write
// quorum as before. Writes fenced by a held lease (conditional writes,
// version updates) queue by their holder, so they never share a call with
// writes fenced otherwise; each such holder writes a key once per
// server, so they go alone.
type manifestWrites struct {
	shards ShardAPI
	// timeout bounds a batched call when none of its writes has a
	// deadline.
	timeout time.Duration

	mu     sync.Mutex
	queues map[writeTarget]*writeQueue
}

// writeTarget is what the writes of one batch share: the server and the
// lease fence the server checks them by.
type writeTarget struct {
	addr, lease string
}

type writeQueue struct {
	busy    bool // a call to the target is in flight
	pending []*writeReq
}

type writeReq struct {
	ctx  context.Context
	m    *metadata.Manifest
	done chan writeResult // buffered: the sender never blocks
}

type writeResult struct {
	res shardrpc.PutManifestResponse
	err error
}

func newManifestWrites(shards ShardAPI, timeout time.Duration) *manifestWrites {
	return &manifestWrites{shards: shards, timeout: timeout, queues: map[writeTarget]*writeQueue{}}
}

// put is ShardAPI.PutManifestFenced, batched with the writes of other
// requests to addr (under the same lease) while a call to it is in
// flight.
func (b *manifestWrites) put(ctx context.Context, addr string, m *metadata.Manifest, lease string) (shardrpc.PutManifestResponse, error) {
	t := writeTarget{addr: addr, lease: lease}
	b.mu.Lock()
	q := b.queues[t]
	if q == nil {
		q = &writeQueue{}
		b.queues[t] = q
	}
	if q.busy {
		r := &writeReq{ctx: ctx, m: m, done: make(chan writeResult, 1)}
		q.pending = append(q.pending, r)
		b.mu.Unlock()
		select {
		case out := <-r.done:
			return out.res, out.err
		case <-ctx.Done():
		}
		b.mu.Lock()
		if i := slices.Index(q.pending, r); i >= 0 {
			q.pending = slices.Delete(q.pending, i, i+1)
			b.mu.Unlock()
			return shardrpc.PutManifestResponse{}, ctx.Err()
		}
		b.mu.Unlock()
		// NB: taken into a call already: it is waited for, so that the
		// batcher holds no reference to m once put returns (the caller
		// may change m, e.g. give it a new version for another try). The
		// call is bounded (send).
		out := <-r.done
		return out.res, out.err
	}
	q.busy = true
	b.mu.Unlock()
	res, err := b.shards.PutManifestFenced(ctx, addr, m, lease)
	go b.drain(t, q)
	return res, err
}

// drain sends the writes that queued for t, a batch at a time, until none
// is left; then the next write goes alone again, and the target's queue
// is forgotten (a lease holder's target is used once).
func (b *manifestWrites) drain(t writeTarget, q *writeQueue) {
	for {
		b.mu.Lock()
		var batch []*writeReq
		for _, r := range q.pending {
			if err := r.ctx.Err(); err != nil { // its request has given up
				r.done <- writeResult{err: err}
				continue
			}
			batch = append(batch, r)
		}
		q.pending = nil
		if len(batch) == 0 {
			q.busy = false
			delete(b.queues, t)
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		for len(batch) > 0 {
			n, size := 1, encodedSize(batch[0].m)
			for n < len(batch) && n < shardrpc.MaxBatch && size+encodedSize(batch[n].m) <= maxBatchBytes {
				size += encodedSize(batch[n].m)
				n++
			}
			b.send(t, batch[:n])
			batch = batch[n:]
		}
	}
}

// maxBatchBytes bounds the encoded manifests of one batched call, well
// below what a shard server reads of one request (its MaxJSONBody, 64 MiB
// by default): 500 small objects of up to 128 KiB inline (Config.InlineMax)
// would pass it.
const maxBatchBytes = 8 << 20

// encodedSize is about how many bytes m takes in a request (JSON, its
// inline data in base64), generously.
func encodedSize(m *metadata.Manifest) int {
	return 1024 + len(m.Inline)*4/3 + 512*len(m.Parts)
}

// send writes the manifests of chunk to t.addr in one call and hands each
// its result.
func (b *manifestWrites) send(t writeTarget, chunk []*writeReq) {
	if len(chunk) == 1 {
		r := chunk[0]
		res, err := b.shards.PutManifestFenced(r.ctx, t.addr, r.m, t.lease)
		r.done <- writeResult{res, err}
		return
	}
	// NB: the call lives as long as the latest of its writes may wait; a
	// request that gives up earlier stops waiting on its own.
	var deadline time.Time
	ms := make([]*metadata.Manifest, len(chunk))
	for i, r := range chunk {
		ms[i] = r.m
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
	results, err := b.shards.PutManifestsFenced(ctx, t.addr, ms, t.lease)
	for i, r := range chunk {
		r.done <- putAnswer(t.addr, r.m, results, i, err)
	}
}

// putAnswer turns result i of a batched write into PutManifestFenced's
// result.
func putAnswer(addr string, m *metadata.Manifest, results []shardrpc.PutResult, i int, err error) writeResult {
	if err != nil {
		return writeResult{err: err}
	}
	r := results[i]
	if err := r.Err(); err != nil {
		return writeResult{err: fmt.Errorf("node %s: put manifest %s/%s: %w", addr, m.Bucket, m.Key, err)}
	}
	if r.Current == nil {
		// NB: a server that predates PutResult.Current cannot say whether
		// a newer version refused the manifest; not stored, as far as a
		// quorum is concerned.
		return writeResult{err: fmt.Errorf("node %s: put manifest %s/%s: the batched answer names no current version", addr, m.Bucket, m.Key)}
	}
	return writeResult{res: shardrpc.PutManifestResponse{Stored: r.Stored, Current: *r.Current, Replaced: r.Replaced, Held: r.Held}}
}

// putManifest writes m to addr fenced by lease, batched with concurrent
// writes to addr when the layer batches (writes).
func (l *layer) putManifest(ctx context.Context, addr string, m *metadata.Manifest, lease string) (shardrpc.PutManifestResponse, error) {
	if l.writes == nil {
		return l.shards.PutManifestFenced(ctx, addr, m, lease)
	}
	return l.writes.put(ctx, addr, m, lease)
}
