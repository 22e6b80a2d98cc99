package repair

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// Batched inline repairs.
//
// An object stored inside its manifest (inline) is repaired by its
// manifest switch alone: a fence (the key's versions from every live
// server of its placement) and a write (to those and the new servers).
// One switch at a time costs ~17 calls per object with a 9-server
// placement, and a dead server of a cluster of small objects held most of
// them: a million objects on twelve servers left ~750,000 switches, hours
// of calls. So a job runner that takes an inline job takes up to
// inlineBatch more of the same bucket from the queue (scheduler.popBatch)
// and runs their switches together (switchBatch): one fence call and one
// write call per server for all of them (shardrpc's batched manifest
// calls), about 22 calls per batch on twelve servers.
//
// Nothing else changes: each job is prepared and planned as alone, each
// switch's answers are judged by the same code as a single switch's
// (switchOp), and each job ends with its own outcome, so one superseded
// object or one short of its quorum fails alone. A job retried after a
// failure runs alone (batchable), which also keeps working with servers
// that predate shardrpc.Unfenced: they refuse batched switches, and the
// retry makes single ones.

// inlineBatch is the most jobs one batch of inline switches carries: a
// server's share of a batch's calls is then ~96 keys with a 9-of-12
// placement (~130 KB of 1 KiB objects), and four job runners keep ~500
// switches in flight per server.
const inlineBatch = 128

// batchLook bounds how far down the queue a runner looks for jobs to join
// its batch: jobs it passes over stay where they were.
const batchLook = 4 * inlineBatch

// maxSwitchBatchBytes bounds the encoded manifests of one batched write
// (a shard server reads up to 64 MiB of a request): inline objects may be
// up to 128 KiB each.
const maxSwitchBatchBytes = 8 << 20

// batchShards is what batched switches need from the shard servers
// (*shardrpc.Client has it): every version of many keys of a bucket, and
// many manifest writes, in one call each.
type batchShards interface {
	GetManifestVersionsBatch(ctx context.Context, addr, bucket string, keys []string) ([]shardrpc.KeyVersions, error)
	PutManifestsFenced(ctx context.Context, addr string, ms []*metadata.Manifest, lease string) ([]shardrpc.PutResult, error)
}

// batchable reports whether j may run in a batch of inline switches led
// by first (nil: whether j may lead one): an inline object's repair onto
// new servers, tried for the first time, of first's bucket.
func (w *Worker) batchable(first, j *job) bool {
	if _, ok := w.shards.(batchShards); !ok {
		return false
	}
	if !j.inline || j.inPlace || j.attempt > 0 {
		return false
	}
	return first == nil || j.bucket == first.bucket
}

// switchBatch runs the switches ops, all of keys of bucket and made with
// the membership of v, with one fence call and one write call to each
// server involved (more when a server's share exceeds shardrpc.MaxBatch
// or maxSwitchBatchBytes, or holds both current and noncurrent switches),
// then tells the servers which switches are confirmed (notifyConfirmed):
// errs[i] is ops[i]'s outcome, as switchManifest or switchVersion would
// return it.
func (w *Worker) switchBatch(ctx context.Context, bs batchShards, v nodeView, bucket string, ops []*switchOp) []error {
	errs := make([]error, len(ops))

	// Fence: each server is asked about the keys of the switches whose
	// live old placement it is in.
	type fenceCall struct {
		keys    []string
		index   map[string]int // key -> its index in keys
		answers []shardrpc.KeyVersions
		err     error
	}
	calls := map[string][]*fenceCall{} // server -> its calls
	type asked struct {
		call *fenceCall
		i    int // the key's index in call.keys
	}
	where := make([]map[string]asked, len(ops)) // op -> server -> its key's answer
	for oi, op := range ops {
		where[oi] = map[string]asked{}
		for _, id := range op.oldLive {
			cs := calls[id]
			if len(cs) == 0 || len(cs[len(cs)-1].keys) == shardrpc.MaxBatch {
				cs = append(cs, &fenceCall{index: map[string]int{}})
				calls[id] = cs
			}
			c := cs[len(cs)-1]
			// NB: a key's current and noncurrent switches share its
			// answer, which carries every version.
			i, ok := c.index[op.old.Key]
			if !ok {
				i = len(c.keys)
				c.keys = append(c.keys, op.old.Key)
				c.index[op.old.Key] = i
			}
			where[oi][id] = asked{c, i}
		}
	}
	var wg sync.WaitGroup
	for id, cs := range calls {
		addr := v.nodes[id].Addr
		for _, c := range cs {
			wg.Go(func() { c.answers, c.err = bs.GetManifestVersionsBatch(ctx, addr, bucket, c.keys) })
		}
	}
	wg.Wait()
	var write []*switchOp
	var writeIdx []int
	for oi, op := range ops {
		for _, id := range op.oldLive {
			a := where[oi][id]
			switch {
			case a.call.err != nil:
				op.fenceAnswer(nil, nil, a.call.err)
			case a.call.answers[a.i].Err != "":
				op.fenceAnswer(nil, nil, errors.New(a.call.answers[a.i].Err))
			default:
				kv := a.call.answers[a.i]
				op.fenceAnswer(kv.Current, kv.Previous, nil)
			}
		}
		if errs[oi] = op.fenced(); errs[oi] == nil {
			write = append(write, op)
			writeIdx = append(writeIdx, oi)
		}
	}
	if len(write) == 0 {
		return errs
	}

	// Write: each server gets the switches it is a target of, current
	// ones as single PutManifests store them (no lease check), noncurrent
	// ones fenced as PutVersion fences them.
	type writeCall struct {
		id      string
		lease   string
		ops     []*switchOp
		size    int
		results []shardrpc.PutResult
		err     error
	}
	var wcalls []*writeCall
	open := map[[2]string]*writeCall{} // server, lease -> the call being filled
	for _, op := range write {
		lease := shardrpc.Unfenced
		if op.noncurrent {
			lease = shardrpc.NoLease
		}
		size := switchSize(&op.nm)
		for _, id := range op.targets {
			c := open[[2]string{id, lease}]
			if c == nil || len(c.ops) == shardrpc.MaxBatch || c.size+size > maxSwitchBatchBytes {
				c = &writeCall{id: id, lease: lease}
				open[[2]string{id, lease}] = c
				wcalls = append(wcalls, c)
			}
			c.ops = append(c.ops, op)
			c.size += size
		}
	}
	// NB: one deadline for the whole write, as for a single switch: the
	// bound docs/CONSISTENCY.md counts on.
	wctx, cancel := context.WithTimeout(ctx, switchWriteTimeout)
	defer cancel()
	for _, c := range wcalls {
		ms := make([]*metadata.Manifest, len(c.ops))
		for i, op := range c.ops {
			ms[i] = &op.nm
		}
		ni := v.nodes[c.id]
		if !ni.Live {
			// NB: an unfinished switch's server that is down now.
			c.err = fmt.Errorf("%s is not live", c.id)
			continue
		}
		wg.Go(func() { c.results, c.err = bs.PutManifestsFenced(wctx, ni.Addr, ms, c.lease) })
	}
	wg.Wait()
	for _, c := range wcalls {
		for i, op := range c.ops {
			if c.err != nil {
				op.wrote(c.id, false, metadata.Version{}, false, c.err)
				continue
			}
			r := c.results[i]
			switch {
			case r.Err() != nil:
				op.wrote(c.id, false, metadata.Version{}, false, fmt.Errorf("put manifest %s: %w", op.ref(), r.Err()))
			case !op.noncurrent && r.Current == nil:
				// NB: a server that cannot say which version is current
				// there has not shown that it stored the switch.
				op.wrote(c.id, false, metadata.Version{}, false, fmt.Errorf("put manifest %s: the batched answer names no current version", op.ref()))
			case op.noncurrent:
				op.wrote(c.id, false, metadata.Version{}, r.Held, nil)
			default:
				op.wrote(c.id, r.Stored, *r.Current, r.Held, nil)
			}
		}
	}
	werrs := make([]error, len(write))
	for i, op := range write {
		werrs[i] = op.result()
		errs[writeIdx[i]] = werrs[i]
	}
	w.notifyConfirmed(ctx, v, write, werrs)
	return errs
}

// switchSize is about how many bytes m takes in a batched write (JSON,
// inline data in base64), generously.
func switchSize(m *metadata.Manifest) int {
	return 1024 + len(m.Inline)*4/3 + 512*len(m.Parts)
}
