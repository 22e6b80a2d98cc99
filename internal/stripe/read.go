package stripe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/metadata"
)

// ReadParams describes one stripe group to read.
type ReadParams struct {
	Code      codec.Code
	ChunkSize int64
	FileID    string
	Size      int64    // data bytes in the group
	Targets   []Target // one per shard, in shard order
	// ShardCRC, when set, is not checked here (servers verify every block);
	// it is kept for callers that rebuild whole shards.
	// Depth is how many stripes are fetched ahead of the writer; 0 means 2.
	Depth int
	// ShardTimeout bounds one shard fetch; 0 means 15s.
	ShardTimeout time.Duration
	// OnDegraded, if set, is called once per stripe that needed decoding,
	// with the shard indexes that could not be read.
	OnDegraded func(bad []int)
}

// Read writes bytes [off, off+length) of the stripe group to w. It reads
// only the data shards covering the range when they are healthy, and
// decodes from any k shards when some are missing, unreachable, slow or
// fail their checksums. Shards that fail once are not asked again during
// this call.
func Read(ctx context.Context, shards Shards, p ReadParams, off, length int64, w io.Writer) error {
	if off < 0 || length < 0 || off+length > p.Size {
		return fmt.Errorf("stripe: range %d+%d outside %d bytes", off, length, p.Size)
	}
	if length == 0 {
		return nil
	}
	if len(p.Targets) != p.Code.TotalShards() {
		return fmt.Errorf("stripe: %d targets for %d shards", len(p.Targets), p.Code.TotalShards())
	}
	if p.Depth <= 0 {
		p.Depth = 2
	}
	if p.ShardTimeout <= 0 {
		p.ShardTimeout = 15 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	r := &reader{p: p, shards: shards, geo: Geometry(p.Code, p.ChunkSize), bad: map[int]error{}}
	for i, t := range p.Targets {
		if t.Addr == "" {
			r.bad[i] = errors.New("server not reachable")
		}
	}
	full := int64(p.Code.DataShards()) * p.ChunkSize
	first, last := off/full, (off+length-1)/full

	type result struct {
		data []byte
		err  error
	}
	results := make(chan chan result, p.Depth)
	go func() {
		defer close(results)
		for s := first; s <= last; s++ {
			a, b := int64(0), full
			if s == first {
				a = off - s*full
			}
			if s == last {
				b = off + length - s*full
			}
			ch := make(chan result, 1)
			select {
			case results <- ch:
			case <-ctx.Done():
				return
			}
			go func() {
				data, err := r.fetch(ctx, s, a, b)
				ch <- result{data, err}
			}()
		}
	}()
	for ch := range results {
		res := <-ch
		if res.err != nil {
			return res.err
		}
		if _, err := w.Write(res.data); err != nil {
			return fmt.Errorf("stripe: writing to client: %w", err)
		}
	}
	return ctx.Err()
}

type reader struct {
	p      ReadParams
	shards Shards
	geo    metadata.StripeGeometry

	mu  sync.Mutex
	bad map[int]error // shards that failed during this read
}

func (r *reader) isBad(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad[i] != nil
}

func (r *reader) markBad(i int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad[i] == nil {
		r.bad[i] = err
	}
}

// fetch returns bytes [a, b) of stripe s's data.
func (r *reader) fetch(ctx context.Context, s, a, b int64) ([]byte, error) {
	k, n := r.p.Code.DataShards(), r.p.Code.TotalShards()
	chunk, _ := r.geo.Chunk(r.p.Size, s)
	base := s * r.p.ChunkSize // offset of this stripe's chunk in every shard file

	// The data shards the range touches, and the column range [lo, hi)
	// within their chunks. RS decodes column by column, so a degraded
	// ranged read needs only those columns; codes with sub-chunks couple
	// the whole chunk.
	need := make([]bool, n)
	lo, hi := chunk, int64(0)
	for i := a / chunk; i <= (b-1)/chunk; i++ {
		need[i] = true
		lo = min(lo, max(a, i*chunk)-i*chunk)
		hi = max(hi, min(b, (i+1)*chunk)-i*chunk)
	}
	if r.p.Code.SubChunks() > 1 || r.p.Code.ShardMultiple() > 1 {
		lo, hi = 0, chunk
	}
	cols := make([][]byte, n)
	fetched := r.fetchSet(ctx, s, base, lo, hi, need, cols)
	missing := false
	for i := range n {
		if need[i] && cols[i] == nil {
			missing = true
		}
	}
	if missing {
		// Degraded: top up to k good shards, data shards first (they are
		// also what we return), then parity.
		var bad []int
		for i := range n {
			if r.isBad(i) {
				bad = append(bad, i)
			}
		}
		for fetched < k {
			more := make([]bool, n)
			want := k - fetched
			for i := 0; i < n && want > 0; i++ {
				if cols[i] == nil && !r.isBad(i) {
					more[i] = true
					want--
				}
			}
			if want == k-fetched {
				break // nobody left to ask
			}
			fetched += r.fetchSet(ctx, s, base, lo, hi, more, cols)
		}
		if fetched < k {
			var errs []error
			r.mu.Lock()
			for i, err := range r.bad {
				errs = append(errs, &ShardError{Index: i, Node: r.p.Targets[i].Node, Err: err})
			}
			r.mu.Unlock()
			return nil, &QuorumError{Op: "read", Want: k, Got: fetched, Errs: errs}
		}
		if err := r.p.Code.ReconstructSome(cols, need); err != nil {
			return nil, fmt.Errorf("stripe: decode stripe %d: %w", s, err)
		}
		if r.p.OnDegraded != nil {
			r.p.OnDegraded(bad)
		}
	}
	out := make([]byte, 0, b-a)
	for i := a / chunk; i <= (b-1)/chunk; i++ {
		from := max(a, i*chunk) - i*chunk
		to := min(b, (i+1)*chunk) - i*chunk
		out = append(out, cols[i][from-lo:to-lo]...)
	}
	return out, nil
}

// fetchSet reads columns [lo, hi) of stripe s from every shard in want, in
// parallel, into cols. It returns how many of them arrived; failures are
// marked bad.
func (r *reader) fetchSet(ctx context.Context, s, base, lo, hi int64, want []bool, cols [][]byte) int {
	var g errgroup.Group
	var mu sync.Mutex
	got := 0
	for i, ok := range want {
		if !ok || r.isBad(i) {
			continue
		}
		g.Go(func() error {
			buf, err := r.fetchOne(ctx, i, base+lo, hi-lo)
			if err != nil {
				r.markBad(i, err)
				return nil
			}
			mu.Lock()
			cols[i] = buf
			got++
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	return got
}

func (r *reader) fetchOne(ctx context.Context, i int, off, length int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.p.ShardTimeout)
	defer cancel()
	t := r.p.Targets[i]
	rc, err := r.shards.GetShard(ctx, t.Addr, r.p.FileID, i, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, length)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("reading shard %d: %w", i, err)
	}
	return buf, nil
}
