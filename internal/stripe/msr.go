package stripe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// Degraded-read methods, as Degraded.Method reports them.
const (
	// MethodDecode read k shards' chunks and decoded.
	MethodDecode = "decode"
	// MethodMSR rebuilt the lost chunks the range needs from the repair
	// sub-chunks of the other shards (regenerating codes: n-1 helpers,
	// beta sub-chunks each), as a repair would.
	MethodMSR = "msr"
)

// Degraded describes one stripe that was read without some of the data
// shards its range covers.
type Degraded struct {
	// Bad are the shard indexes that could not be read.
	Bad []int
	// Corrupt are those of Bad whose data failed a block's checksum
	// (shardrpc.ErrCorrupt): a framed shard read is checked by the
	// reader, so the gateway is where such a failure is seen.
	Corrupt []int
	// Method is MethodDecode or MethodMSR.
	Method string
	// Bytes are the shard bytes fetched for the stripe, including those of
	// an MSR attempt that failed and fell back to decoding.
	Bytes int64
}

// Helpers is what a degraded read of a regenerating code needs besides
// Shards: a server's repair encoding of its shard for a few stripes
// (shardrpc.PathRepairHelper). *shardrpc.Client implements it; Read finds
// it on its Shards by type assertion.
type Helpers interface {
	RepairHelper(ctx context.Context, addr string, req shardrpc.HelperRequest) (io.ReadCloser, error)
}

// planMSR decides whether the range [a, b) of a stripe with chunks of
// chunk bytes is cheaper to read by rebuilding its lost data chunks from
// repair sub-chunks than by decoding from k whole chunks, and returns the
// repair plan if so. It needs a regenerating code with sub-chunks, a shard
// client that serves helper encodings, and a needed data shard known bad;
// the plan rebuilds every bad shard from all the others.
func (r *reader) planMSR(chunk, a, b int64, need []bool) (*codec.Plan, bool) {
	code, ok := r.p.Code.(codec.Regenerating)
	if !ok || code.SubChunks() <= 1 {
		return nil, false
	}
	if _, ok := r.shards.(Helpers); !ok {
		return nil, false
	}
	n, k := code.TotalShards(), code.DataShards()
	var lost []int
	neededLost := false
	for i := range n {
		if r.isBad(i) {
			lost = append(lost, i)
			neededLost = neededLost || need[i]
		}
	}
	if !neededLost || len(lost) > n-k {
		return nil, false
	}
	for i := range n {
		if r.isSlow(i) && !r.isBad(i) {
			return nil, false // a repair waits for every helper: decode around it
		}
	}
	plan, err := code.RepairPlan(lost)
	if err != nil || plan.Method == codec.MethodConventional {
		return nil, false
	}
	sc := chunk / int64(plan.SubChunks)
	bytes := int64(plan.Downloads()) * sc
	for i := a / chunk; i <= (b-1)/chunk; i++ {
		if !slices.Contains(lost, int(i)) {
			bytes += min(b, (i+1)*chunk) - max(a, i*chunk) // read as it is
		}
	}
	// The conventional decode of a vector code reads k whole chunks.
	if bytes >= int64(k)*chunk {
		return nil, false
	}
	return plan, true
}

// fetchMSR returns bytes [a, b) of stripe s's data as plan says: the lost
// chunks the range covers are rebuilt from the helpers' repair encodings
// of this stripe, the others are read as they are. It also returns the
// bytes it received. On error, the shards that failed are marked bad and
// the caller decodes instead.
func (r *reader) fetchMSR(ctx context.Context, plan *codec.Plan, s, chunk, a, b int64) ([]byte, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.p.ShardTimeout)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	sent := make([][]byte, len(plan.Helpers))
	got := make([]int64, len(plan.Helpers)+r.p.Code.TotalShards())
	for j := range plan.Helpers {
		t := &plan.Helpers[j]
		g.Go(func() error {
			buf := make([]byte, t.OutputLen(plan.SubChunks, int(chunk)))
			n, err := r.helperChunk(gctx, t.Shard, plan.Failed, s, buf)
			got[j] = int64(n)
			if err != nil {
				r.failed(t.Shard, err)
				return err
			}
			sent[j] = buf
			return nil
		})
	}
	// Needed shards that are not lost: just the range's bytes.
	first, last := a/chunk, (b-1)/chunk
	direct := make([][]byte, last-first+1)
	for i := first; i <= last; i++ {
		if slices.Contains(plan.Failed, int(i)) {
			continue
		}
		g.Go(func() error {
			from, to := max(a, i*chunk)-i*chunk, min(b, (i+1)*chunk)-i*chunk
			buf, err := r.fetchOne(gctx, int(i), s*r.p.ChunkSize+from, to-from)
			if err != nil {
				r.failed(int(i), err)
				return err
			}
			got[len(plan.Helpers)+int(i)] = to - from
			direct[i-first] = buf
			return nil
		})
	}
	err := g.Wait()
	var moved int64
	for _, n := range got {
		moved += n
	}
	if err != nil {
		return nil, moved, err
	}
	rebuilt := make([][]byte, len(plan.Failed))
	if err := plan.Rebuild(int(chunk), sent, rebuilt); err != nil {
		return nil, moved, fmt.Errorf("stripe: rebuild stripe %d: %w", s, err)
	}
	out := make([]byte, 0, b-a)
	for i := first; i <= last; i++ {
		from, to := max(a, i*chunk)-i*chunk, min(b, (i+1)*chunk)-i*chunk
		if f := slices.Index(plan.Failed, int(i)); f >= 0 {
			out = append(out, rebuilt[f][from:to]...)
		} else {
			out = append(out, direct[i-first]...)
		}
	}
	return out, moved, nil
}

// failed marks shard i bad after err, unless err only says that the read
// was called off (another shard failed first, or the client left).
func (r *reader) failed(i int, err error) {
	if !errors.Is(err, context.Canceled) {
		r.markBad(i, err)
	}
}

// helperChunk reads shard idx's repair encoding of stripe s for the
// failure set lost into buf, which has its exact length. It returns the
// bytes it read.
func (r *reader) helperChunk(ctx context.Context, idx int, lost []int, s int64, buf []byte) (int, error) {
	rc, err := r.shards.(Helpers).RepairHelper(ctx, r.p.Targets[idx].Addr, shardrpc.HelperRequest{
		RepairGroup: shardrpc.RepairGroup{Code: r.p.Code.Name(), FileID: r.p.FileID, ChunkSize: r.p.ChunkSize, PartSize: r.p.Size},
		Lost:        lost, Idx: idx, First: s, Count: 1,
	})
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, buf)
	if err != nil {
		return n, fmt.Errorf("repair encoding of shard %d: %w", idx, err)
	}
	return n, nil
}
