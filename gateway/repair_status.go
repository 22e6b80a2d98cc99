package gateway

import (
	"context"
	"slices"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// repairStatusClient is how the shard client reports one server's repair
// worker (*shardrpc.Client has it).
type repairStatusClient interface {
	RepairStatus(ctx context.Context, addr string) (shardrpc.RepairStatus, error)
}

// shardRepairSource adapts the shard servers' repair status to the
// admin status's RepairSource.
type shardRepairSource struct{ c repairStatusClient }

// repairSource returns the RepairSource of a shard API, if it has one.
func repairSource(shards any) (RepairSource, bool) {
	if s, ok := shards.(RepairSource); ok {
		return s, true
	}
	if c, ok := shards.(repairStatusClient); ok {
		return shardRepairSource{c}, true
	}
	return nil, false
}

// RepairStatus converts one server's report. Each stripe group is counted
// only by its coordinator, so the sums over servers are cluster totals.
func (s shardRepairSource) RepairStatus(ctx context.Context, addr string) (StripeStatus, RepairStatus, error) {
	st, err := s.c.RepairStatus(ctx, addr)
	if err != nil {
		return StripeStatus{}, RepairStatus{}, err
	}
	stripes := StripeStatus{
		Total: st.Stripes.Total, Noncurrent: st.Stripes.Noncurrent, Healthy: st.Stripes.Total - st.Stripes.Degraded, Degraded: st.Stripes.Degraded,
		LostShards: st.Stripes.LostShards, Waiting: st.Stripes.Waiting,
		Pending: st.Stripes.Pending, GraceLeftSeconds: st.Stripes.GraceLeft, DownSeen: st.Stripes.DownSeen, upSeen: st.Stripes.UpSeen,
		unscanned: st.Stripes.Scanned == "",
		Draining:  st.Stripes.Draining, DrainWaiting: st.Stripes.DrainWaiting,
	}
	r := RepairStatus{
		Queued: st.Repair.Queued, Running: st.Repair.Running, Done: st.Repair.Done, Failed: st.Repair.Failed,
		BytesMoved: st.Repair.BytesMoved, ETASeconds: st.Repair.Remaining, Methods: st.Repair.ByMethod,
		SyncKeys: st.Sync.KeysSynced,
	}
	if st.Sync.Pending {
		r.SyncPending = 1
	}
	if b := st.Batch; b != nil && b.Elapsed > 0 {
		r.RateBytesPerSec = float64(b.Bytes) / b.Elapsed
		r.PredictedSeconds, r.ElapsedSeconds = b.Predicted, b.Elapsed
	} else if b := st.Last; b != nil {
		r.PredictedSeconds, r.ElapsedSeconds = b.Predicted, b.Elapsed
	}
	for _, b := range []*shardrpc.RepairBatch{st.Last, st.Batch} {
		if b == nil {
			continue
		}
		if start, err := time.Parse(time.RFC3339Nano, b.Start); err == nil {
			r.spans = append(r.spans, batchSpan{start: start, elapsed: b.Elapsed, predicted: b.Predicted})
		}
	}
	return stripes, r, nil
}

// batchSpan is one server's repair batch.
type batchSpan struct {
	start              time.Time
	elapsed, predicted float64 // seconds
}

func (b batchSpan) end() time.Time { return b.start.Add(seconds(b.elapsed)) }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// batchGap: server batches closer than this belong to one incident (the
// servers detect a failure, and its grace ends, seconds apart).
const batchGap = time.Minute

// clusterBatch merges the servers' batches into the cluster's latest:
// the run of batches, each starting within batchGap of the end of those
// before it, that contains the latest one. The cluster is redundant when
// the last of them ends, and its planners predicted that for the latest
// start + prediction; both are returned in seconds from the run's first
// start.
func clusterBatch(spans []batchSpan) (predicted, elapsed float64, ok bool) {
	if len(spans) == 0 {
		return 0, 0, false
	}
	slices.SortFunc(spans, func(a, b batchSpan) int { return a.start.Compare(b.start) })
	first, end, predEnd := spans[0].start, spans[0].end(), spans[0].start.Add(seconds(spans[0].predicted))
	for _, s := range spans[1:] {
		if s.start.After(end.Add(batchGap)) {
			first, end, predEnd = s.start, s.end(), s.start.Add(seconds(s.predicted))
			continue
		}
		if s.end().After(end) {
			end = s.end()
		}
		if p := s.start.Add(seconds(s.predicted)); p.After(predEnd) {
			predEnd = p
		}
	}
	return predEnd.Sub(first).Seconds(), end.Sub(first).Seconds(), true
}

// seenByAll returns the down servers that every reporting worker counted
// at its last scan or never heard of, sorted. A server some worker still
// takes for live is left out: that worker may yet find stripes of theirs
// on it. One a worker never heard of (it joined after the server died)
// has nothing of it to count: a manifest naming it would have made the
// worker count it.
func seenByAll(seen, up map[string][]string) []string {
	live := map[string]bool{}
	for _, ids := range up {
		for _, id := range ids {
			live[id] = true
		}
	}
	var out []string
	for _, ids := range seen {
		for _, id := range ids {
			if !live[id] && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}
