package stripe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/metadata"
)

// ReadParams describes one stripe group to read.
type ReadParams struct {
	Code      codec.Code
	ChunkSize int64
	FileID    string
	Size      int64    // data bytes in the group
	Targets   []Target // one per shard, in shard order
	// ShardCRC, when set, is not checked here (every block is checked
	// by the server, or by the shard client's framed reader);
	// it is kept for callers that rebuild whole shards.
	// Depth is how many stripes are fetched ahead of the writer; 0 means 2.
	Depth int
	// ShardTimeout bounds one shard fetch; 0 means 15s.
	ShardTimeout time.Duration
	// HedgeDelay is how long a needed shard may take before one more
	// shard is asked for, so that a slow or hung server costs a decode
	// instead of a stall: 0 adapts it to the read (3x the median shard
	// latency seen so far, within MinHedgeDelay..MaxHedgeDelay; before any
	// shard arrived, MaxHedgeDelay); negative turns hedging off.
	HedgeDelay time.Duration
	// Memory, if set, bounds the shard buffers of this read together with
	// every other read sharing it (ReadMemory); nil bounds each read to
	// Depth+1 stripes only.
	Memory *ReadMemory
	// OnDegraded, if set, is called once per stripe whose range needed a
	// shard that could not be read: how it was read instead, and the bytes
	// that took. Stripes are fetched concurrently, and so are the calls.
	OnDegraded func(Degraded)
}

// Bounds of the adaptive hedge delay. The floor keeps a fast cluster
// from hedging on scheduling noise (every hedge costs a shard's read);
// the ceiling bounds what a hung server adds to a GET.
const (
	MinHedgeDelay = 50 * time.Millisecond
	MaxHedgeDelay = 250 * time.Millisecond
)

// Read writes bytes [off, off+length) of the stripe group to w. It reads
// only the data shards covering the range when they are healthy, and
// decodes from any k shards when some are missing, unreachable, slow or
// fail their checksums. Shards that fail once are not asked again during
// this call. For a regenerating code whose range needs a shard already
// known lost, a stripe is read like a repair instead (MethodMSR) when that
// moves fewer bytes than decoding.
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

	full := int64(p.Code.DataShards()) * p.ChunkSize
	first, last := off/full, (off+length-1)/full
	r := &reader{p: p, shards: shards, geo: Geometry(p.Code, p.ChunkSize), bad: map[int]error{}, slow: map[int]bool{},
		ctx: ctx, off: off, length: length, first: first, last: last}
	r.initStreams()
	defer r.closeStreams()
	for i, t := range p.Targets {
		if t.Addr == "" {
			r.bad[i] = errors.New("server not reachable")
		}
	}

	type result struct {
		data    [][]byte // the range's bytes, in order
		release func()   // gives data's buffers back once written
		err     error
	}
	results := make(chan chan result, p.Depth)
	go func() {
		defer close(results)
		for s := first; s <= last; s++ {
			a, b := r.rangeOf(s)
			ch := make(chan result, 1)
			select {
			case results <- ch:
			case <-ctx.Done():
				return
			}
			// NB: memory is taken in stripe order, once the stripe has
			// its place in the queue (see ReadMemory).
			free, err := p.Memory.take(ctx, r.cost(s, a, b))
			if err != nil {
				ch <- result{err: err}
				return
			}
			r.launched(s)
			go func() {
				data, release, err := r.fetch(ctx, s, a, b)
				// NB: before anything else: later stripes may be waiting
				// for this one to give up its place in a shard's stream.
				r.stripeDone(s)
				if err != nil {
					free()
					ch <- result{err: err}
					return
				}
				ch <- result{data, func() { release(); free() }, nil}
			}()
		}
	}()
	// Stripes fetched but not written (the client went away, a later
	// stripe failed) give their buffers and memory back.
	defer func() {
		cancel()
		for ch := range results {
			if res := <-ch; res.release != nil {
				res.release()
			}
		}
	}()
	for ch := range results {
		res := <-ch
		if res.err != nil {
			return res.err
		}
		for _, d := range res.data {
			if _, err := w.Write(d); err != nil {
				res.release()
				return fmt.Errorf("stripe: writing to client: %w", err)
			}
		}
		res.release()
	}
	return ctx.Err()
}

type reader struct {
	p      ReadParams
	shards Shards
	geo    metadata.StripeGeometry
	// ctx is the whole read's: shard streams live as long as it.
	ctx context.Context
	// The read's range, and its first and last stripe.
	off, length, first, last int64

	mu  sync.Mutex
	bad map[int]error // shards that failed during this read
	// slow shards were hedged around: later stripes do without them
	// while enough others remain.
	slow map[int]bool
	// lat are recent shard fetch latencies (the hedge delay's median).
	lat []time.Duration

	// Shard streams (shardstream.go), under mu.
	streams []*shardStream // per shard: its open stream, if any
	busy    []bool         // per shard: a stripe is reading its stream
	turns   []stripeTurns  // per stripe of the read, from first
	oldest  int64          // index in turns of the oldest stripe not done
	changed chan struct{}  // closed (and replaced) when any of the above changes
	closed  bool           // the read is over: streams are closed once free
}

// rangeOf returns the bytes [a, b) of stripe s's data the read covers.
func (r *reader) rangeOf(s int64) (a, b int64) {
	full := int64(r.p.Code.DataShards()) * r.p.ChunkSize
	a, b = 0, full
	if s == r.first {
		a = r.off - s*full
	}
	if s == r.last {
		b = r.off + r.length - s*full
	}
	return a, b
}

// hedgeDelay returns how long to wait for needed shards before asking
// for more.
func (r *reader) hedgeDelay() time.Duration {
	if r.p.HedgeDelay != 0 {
		return r.p.HedgeDelay
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lat) == 0 {
		return MaxHedgeDelay
	}
	l := slices.Clone(r.lat)
	slices.Sort(l)
	return min(max(3*l[len(l)/2], MinHedgeDelay), MaxHedgeDelay)
}

func (r *reader) noteLatency(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lat = append(r.lat, d)
	if len(r.lat) > 32 {
		r.lat = r.lat[len(r.lat)-32:]
	}
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

// fetch returns bytes [a, b) of stripe s's data as slices of the shard
// buffers (no copy), and a func that gives the buffers back once the
// slices are written.
func (r *reader) fetch(ctx context.Context, s, a, b int64) ([][]byte, func(), error) {
	k, n := r.p.Code.DataShards(), r.p.Code.TotalShards()
	chunk, need, lo, hi := r.span(s, a, b)
	base := s * r.p.ChunkSize // offset of this stripe's chunk in every shard file
	var wasted int64          // bytes of an MSR read that failed
	if plan, ok := r.planMSR(chunk, a, b, need); ok {
		out, moved, err := r.fetchMSR(ctx, plan, s, chunk, a, b)
		if err == nil {
			r.degraded(MethodMSR, moved)
			return [][]byte{out}, func() {}, nil
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		wasted = moved // the failed shards are marked bad: decode around them
	}
	cols := make([][]byte, n)
	fetched, err := r.gather(ctx, s, base, lo, hi, need, cols)
	// Every buffer gather filled came from the pool; decoded ones are the
	// codec's own and go to the garbage collector.
	pooled := slices.Clone(cols)
	release := func() {
		for _, b := range pooled {
			putBuf(b)
		}
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	missing := false
	for i := range n {
		if need[i] && cols[i] == nil {
			missing = true
		}
	}
	if missing {
		if fetched < k {
			var errs []error
			r.mu.Lock()
			for i, err := range r.bad {
				errs = append(errs, &ShardError{Index: i, Node: r.p.Targets[i].Node, Err: err})
			}
			r.mu.Unlock()
			release()
			return nil, nil, &QuorumError{Op: "read", Want: k, Got: fetched, Errs: errs}
		}
		if err := r.p.Code.ReconstructSome(cols, need); err != nil {
			release()
			return nil, nil, fmt.Errorf("stripe: decode stripe %d: %w", s, err)
		}
		r.degraded(MethodDecode, wasted+int64(fetched)*(hi-lo))
	}
	var out [][]byte
	for i := a / chunk; i <= (b-1)/chunk; i++ {
		from := max(a, i*chunk) - i*chunk
		to := min(b, (i+1)*chunk) - i*chunk
		out = append(out, cols[i][from-lo:to-lo])
	}
	return out, release, nil
}

// span returns stripe s's chunk length, the data shards bytes [a, b) of
// its data touch, and the column range [lo, hi) needed within their
// chunks. RS decodes column by column, so a degraded ranged read needs
// only those columns; codes with sub-chunks couple the whole chunk.
func (r *reader) span(s, a, b int64) (chunk int64, need []bool, lo, hi int64) {
	chunk, _ = r.geo.Chunk(r.p.Size, s)
	need = make([]bool, r.p.Code.TotalShards())
	lo, hi = chunk, 0
	for i := a / chunk; i <= (b-1)/chunk; i++ {
		need[i] = true
		lo = min(lo, max(a, i*chunk)-i*chunk)
		hi = max(hi, min(b, (i+1)*chunk)-i*chunk)
	}
	if r.p.Code.SubChunks() > 1 || r.p.Code.ShardMultiple() > 1 {
		lo, hi = 0, chunk
	}
	return chunk, need, lo, hi
}

// cost is the memory (ReadMemory) reading bytes [a, b) of stripe s
// takes: k shards of its column range, what a decode needs.
func (r *reader) cost(s, a, b int64) int64 {
	_, _, lo, hi := r.span(s, a, b)
	return int64(r.p.Code.DataShards()) * (hi - lo)
}

// degraded reports a stripe read without some of its needed shards.
func (r *reader) degraded(method string, bytes int64) {
	if r.p.OnDegraded == nil {
		return
	}
	d := Degraded{Method: method, Bytes: bytes}
	r.mu.Lock()
	for i := range r.p.Code.TotalShards() {
		if err := r.bad[i]; err != nil {
			d.Bad = append(d.Bad, i)
			if errors.Is(err, shardrpc.ErrCorrupt) {
				d.Corrupt = append(d.Corrupt, i)
			}
		}
	}
	r.mu.Unlock()
	r.p.OnDegraded(d)
}

// gather reads columns [lo, hi) of stripe s into cols until either
// every needed shard arrived (no decoding) or k shards did (decode). It
// asks for the needed shards first (skipping ones known to be slow while
// enough others remain); each failure is replaced by another shard, data
// shards before parity; and when needed shards are still missing after
// the hedge delay, one more shard is asked for per missing one, so the
// first k to arrive win. Fetches still running when it returns are
// cancelled, and their servers are marked slow for the rest of the read.
// It returns how many shards arrived.
func (r *reader) gather(ctx context.Context, s, base, lo, hi int64, need []bool, cols [][]byte) (int, error) {
	k, n := r.p.Code.DataShards(), r.p.Code.TotalShards()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type arrival struct {
		i   int
		buf []byte
		err error
		d   time.Duration
	}
	arrivals := make(chan arrival, n)
	// started gets one value per shard whose stream reached this stripe.
	started := make(chan struct{}, n)
	asked := make([]bool, n)
	outstanding := 0
	ask := func(i int) {
		asked[i] = true
		outstanding++
		go func() {
			var t0 time.Time
			buf, err := r.readShard(ctx, s, i, base+lo, hi-lo, func() {
				t0 = time.Now()
				started <- struct{}{}
			})
			d := time.Duration(0)
			if !t0.IsZero() {
				d = time.Since(t0)
			}
			arrivals <- arrival{i, buf, err, d}
		}()
	}
	// next returns a shard not yet asked for and not failed, data shards
	// first, preferring ones not known to be slow; -1 if none is left.
	next := func() int {
		for _, slowOK := range []bool{false, true} {
			for i := range n {
				if !asked[i] && !r.isBad(i) && (slowOK || !r.isSlow(i)) {
					return i
				}
			}
		}
		return -1
	}
	healthy := n - r.countBad() - r.countSlow()
	for i := range n {
		if !need[i] || r.isBad(i) {
			continue
		}
		if r.isSlow(i) && healthy >= k {
			continue // decode around it; a replacement is asked below
		}
		ask(i)
	}
	// Make up for needed shards not asked: enough others for a decode.
	short := func() int {
		got := 0
		for i := range n {
			if cols[i] != nil || (asked[i] && !r.isBad(i)) {
				got++
			}
		}
		return k - got
	}
	if !r.allNeededAsked(need, asked) {
		for short() > 0 {
			i := next()
			if i < 0 {
				break
			}
			ask(i)
		}
	}
	fetched := 0
	done := func() bool {
		if fetched >= k {
			return true
		}
		for i := range n {
			if need[i] && cols[i] == nil {
				return false
			}
		}
		return true
	}
	// The hedge delay runs from when the first of this stripe's shard
	// reads begins: a stream serves the stripes before this one first, and
	// waiting for them is no sign of a slow server.
	var hedge <-chan time.Time
	delay := r.hedgeDelay()
	for !done() {
		if outstanding == 0 {
			return fetched, nil // nobody left to ask: the caller reports it
		}
		select {
		case <-started:
			if delay > 0 {
				t := time.NewTimer(delay)
				defer t.Stop()
				hedge = t.C
				delay = 0 // once per stripe
			}
		case a := <-arrivals:
			outstanding--
			if a.err != nil {
				r.markBad(a.i, a.err)
				if r.allNeededAsked(need, asked) && !need[a.i] {
					// A hedge failed: replace it.
					if j := next(); j >= 0 {
						ask(j)
					}
					continue
				}
				// A needed shard failed: it takes k for a decode.
				for short() > 0 {
					j := next()
					if j < 0 {
						break
					}
					ask(j)
				}
				continue
			}
			if a.d > 0 {
				r.noteLatency(a.d)
			}
			cols[a.i] = a.buf
			fetched++
		case <-hedge:
			hedge = nil
			for i := range n {
				if asked[i] && cols[i] == nil && !r.isBad(i) {
					if j := next(); j >= 0 {
						ask(j)
					}
				}
			}
		case <-ctx.Done():
			return fetched, ctx.Err()
		}
	}
	// Whatever is still running lost the race: the rest of this read
	// does without those servers when it can.
	for i := range n {
		if asked[i] && cols[i] == nil && !r.isBad(i) {
			r.markSlow(i)
		}
	}
	return fetched, nil
}

// allNeededAsked reports whether every needed shard is being fetched.
func (r *reader) allNeededAsked(need, asked []bool) bool {
	for i := range need {
		if need[i] && !asked[i] {
			return false
		}
	}
	return true
}

func (r *reader) isSlow(i int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.slow[i]
}

func (r *reader) markSlow(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slow[i] = true
}

func (r *reader) countBad() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bad)
}

func (r *reader) countSlow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := 0
	for i := range r.slow {
		if r.bad[i] == nil {
			c++
		}
	}
	return c
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
	buf := getBuf(length)
	if _, err := io.ReadFull(rc, buf); err != nil {
		putBuf(buf)
		return nil, fmt.Errorf("reading shard %d: %w", i, err)
	}
	return buf, nil
}
