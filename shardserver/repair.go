package shardserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
	"github.com/regen-s3/regen/internal/stripe"
	"github.com/regen-s3/regen/metadata"
)

// Repair data paths (see shardrpc's repair endpoints): this server reads
// its own shard slices from disk, streams to and from peers, and stores
// rebuilt shards. Every stream moves through a few preallocated slice
// buffers, whatever the shard size.

// repairDepth is how many slice positions a repair stage may run ahead of
// the next: enough to overlap disk, network and compute, few enough that
// memory stays at a few slices per stream.
const repairDepth = 3

// MinSRU and MaxSRU bound the slice (request unit) size of repairs.
const (
	MinSRU = 4 << 10
	MaxSRU = 16 << 20
)

// repairState is what the repair endpoints share.
type repairState struct {
	peers *shardrpc.Client
	codes codec.Registry

	sent, received *prometheus.CounterVec // by method
	rebuilt        *prometheus.CounterVec // by method
	failures       *prometheus.CounterVec // by endpoint
}

func newRepairState(cfg Config) (*repairState, error) {
	httpc := cfg.RepairHTTP
	if httpc == nil {
		httpc = shardrpc.NewRepairHTTPClient(nil)
	}
	r := &repairState{
		peers: shardrpc.New(cfg.Secret, httpc),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_repair_bytes_sent_total", Help: "Repair bytes this server sent to peers, by method.",
		}, []string{"method"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_repair_bytes_received_total", Help: "Repair bytes this server received from peers, by method.",
		}, []string{"method"}),
		rebuilt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_repair_shards_stored_total", Help: "Rebuilt shards this server stored after verification, by method.",
		}, []string{"method"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "regen_repair_failures_total", Help: "Repair requests that failed on this server, by endpoint.",
		}, []string{"endpoint"}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{r.sent, r.received, r.rebuilt, r.failures} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// repairRoutes lists the repair endpoints for the route table.
func (s *Server) repairRoutes() []route {
	return []route{
		{"POST " + shardrpc.PathRepairPull, "repair_pull", serveRepair(s, "pull", s.runPull)},
		{"POST " + shardrpc.PathRepairCore, "repair_core", serveRepair(s, "core", s.runCore)},
		{"POST " + shardrpc.PathRepairHelper, "repair_helper", s.repairHelper},
		{"POST " + shardrpc.PathRepairPush, "repair_push", s.repairPush},
		{"POST " + shardrpc.PathRepairCopy, "repair_copy", serveRepair(s, "copy", s.runCopy)},
		{"PUT " + shardrpc.PathRepairStore + "{file}/{idx}", "repair_store", s.repairStore},
	}
}

// serveRepair is the handler of a repair endpoint with a JSON request:
// decode it, run it, answer the run's report or its blamed failure.
func serveRepair[Req any](s *Server, endpoint string, run func(context.Context, Req) (shardrpc.RepairReport, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := s.decode(w, r, &req); err != nil {
			s.fail(w, r, err)
			return
		}
		rep, err := run(r.Context(), req)
		if err != nil {
			s.repairFail(w, r, endpoint, err)
			return
		}
		shardrpc.WriteJSON(w, http.StatusOK, rep)
	}
}

// route is one entry of the route table.
type route struct {
	pattern, name string
	h             http.HandlerFunc
}

// blameError says which node a repair failure is due to.
type blameError struct {
	node string
	err  error
}

func (e *blameError) Error() string { return e.err.Error() }
func (e *blameError) Unwrap() error { return e.err }

// blame attributes err, from a call to peer, to the node the peer itself
// blamed, if it said, else to the peer.
func blame(peer string, err error) error {
	if err == nil {
		return nil
	}
	var be *blameError
	if errors.As(err, &be) {
		return err
	}
	var rf *shardrpc.RepairFailure
	if errors.As(err, &rf) && rf.Node != "" {
		peer = rf.Node
	}
	return &blameError{node: peer, err: err}
}

// repairFail answers a failed repair, blaming a peer or this server.
func (s *Server) repairFail(w http.ResponseWriter, r *http.Request, endpoint string, err error) {
	node := s.cfg.NodeID
	var be *blameError
	if errors.As(err, &be) {
		node = be.node
	}
	if errors.Is(err, shardrpc.ErrBadRequest) {
		s.fail(w, r, err)
		return
	}
	s.rep.failures.WithLabelValues(endpoint).Inc()
	s.log.Warn("repair failed", "endpoint", endpoint, "blame", node, "err", err)
	shardrpc.WriteRepairError(w, node, err)
}

// group is a validated RepairGroup with its code and geometry.
type group struct {
	shardrpc.RepairGroup
	code codec.Code
	geo  metadata.StripeGeometry
	size int64 // every shard file's data length
}

func (s *Server) openGroup(g shardrpc.RepairGroup) (*group, error) {
	c, err := s.rep.codes.Get(g.Code)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", shardrpc.ErrBadRequest, err)
	}
	if err := shardrpc.ValidateShardName(g.FileID, 0); err != nil {
		return nil, err
	}
	if g.ChunkSize <= 0 || g.ChunkSize%int64(c.ShardMultiple()) != 0 || g.PartSize < 0 {
		return nil, fmt.Errorf("%w: chunk size %d / part size %d do not fit %s", shardrpc.ErrBadRequest, g.ChunkSize, g.PartSize, g.Code)
	}
	geo := stripe.Geometry(c, g.ChunkSize)
	return &group{RepairGroup: g, code: c, geo: geo, size: geo.ShardFileSize(g.PartSize)}, nil
}

// unit is one slice position of a shard file: the bytes [off, off+n) of
// every shard file of the group, which the code can combine position-wise.
type unit struct{ off, n int64 }

// units cuts the shard files into slice positions. Scalar codes (alpha 1)
// combine any byte range, so the files are cut into sru-byte slices
// regardless of stripes. Vector codes combine whole chunks (their
// sub-chunks are spread over the chunk), so a slice is one stripe's chunk.
func (g *group) units(sru int) []unit {
	return g.stripeUnits(sru, 0, g.geo.Stripes(g.PartSize))
}

// stripeUnits is units for stripes [first, first+count) only.
func (g *group) stripeUnits(sru int, first, count int64) []unit {
	var chunks []unit // the stripes' chunks, at the same offset in every shard file
	off := first * g.ChunkSize
	for st := first; st < first+count; st++ {
		c, _ := g.geo.Chunk(g.PartSize, st)
		chunks = append(chunks, unit{off, c})
		off += c
	}
	if g.code.SubChunks() > 1 || len(chunks) == 0 {
		return chunks
	}
	var us []unit
	for o := chunks[0].off; o < off; o += int64(sru) {
		us = append(us, unit{o, min(int64(sru), off-o)})
	}
	return us
}

// maxUnit is the longest unit.
func maxUnit(us []unit) int {
	m := int64(0)
	for _, u := range us {
		m = max(m, u.n)
	}
	return int(m)
}

func checkSRU(sru int) error {
	if sru < MinSRU || sru > MaxSRU {
		return fmt.Errorf("%w: slice size %d outside %d..%d", shardrpc.ErrBadRequest, sru, MinSRU, MaxSRU)
	}
	return nil
}

// localShard reads verified byte ranges of a local shard file, keeping the
// last checksum block so sequential slices never re-read or re-verify one.
type localShard struct {
	sf     *shardFile
	buf    []byte
	cached int64 // block index in data, or -1
	data   []byte
}

func (s *Server) openLocal(fileID string, idx int, wantSize int64) (*localShard, error) {
	sf, err := s.shards.open(fileID, idx)
	if err != nil {
		return nil, err
	}
	if sf.size != wantSize {
		sf.f.Close()
		return nil, fmt.Errorf("shard %s.%d has %d bytes, the group's shards %d", fileID, idx, sf.size, wantSize)
	}
	return &localShard{sf: sf, buf: make([]byte, int(sf.hdr.blockSize)+blockCRCSize), cached: -1}, nil
}

func (l *localShard) Close() error { return l.sf.f.Close() }

// readAt fills dst with the data at off.
func (l *localShard) readAt(dst []byte, off int64) error {
	bs := int64(l.sf.hdr.blockSize)
	for len(dst) > 0 {
		i := off / bs
		if n := min(bs, l.sf.size-off); off == i*bs && n > 0 && int64(len(dst)) >= n+blockCRCSize {
			// Whole block with room behind it: read it (and its CRC,
			// which lands where the next block goes) straight into dst,
			// saving a copy through the block buffer.
			if _, err := l.sf.block(i, dst[:n+blockCRCSize]); err != nil {
				return err
			}
			dst, off = dst[n:], off+n
			continue
		}
		if i != l.cached {
			d, err := l.sf.block(i, l.buf)
			if err != nil {
				return err
			}
			l.cached, l.data = i, d
		}
		n := copy(dst, l.data[off-i*bs:])
		if n == 0 {
			return fmt.Errorf("%w: read beyond data at %d", errCorrupt, off)
		}
		dst, off = dst[n:], off+int64(n)
	}
	return nil
}

// report collects a repair's traffic; safe for concurrent use.
type report struct {
	mu  sync.Mutex
	rep shardrpc.RepairReport
}

func (r *report) transfer(from, to string, n int64) {
	r.mu.Lock()
	r.rep.AddTransfer(from, to, n)
	r.mu.Unlock()
}

func (r *report) merge(o shardrpc.RepairReport) {
	r.mu.Lock()
	r.rep.Merge(o)
	r.mu.Unlock()
}

func (r *report) stored(t shardrpc.RepairTarget) {
	r.mu.Lock()
	r.rep.Stored = append(r.rep.Stored, t)
	r.mu.Unlock()
}

// sink is a stream to a downstream server (a rebuilt shard's store, or
// the next PUSH hop), written through a pipe that the call reads.
type sink struct {
	pw   *slicePipeWriter
	n    atomic.Int64
	done chan struct{} // closed when the call has returned; err is set
	err  error
}

func newSink() (*sink, *slicePipeReader) {
	pr, pw := newSlicePipe()
	return &sink{pw: pw, done: make(chan struct{})}, pr
}

// end records the downstream call's outcome.
func (k *sink) end(pr *slicePipeReader, err error) {
	k.err = err
	pr.CloseWithError(errOr(err, io.ErrClosedPipe))
	close(k.done)
}

// Write sends p; it returns when the downstream has taken it. If the
// downstream failed, its error (which names the node to blame) is
// returned rather than the pipe's.
func (k *sink) Write(p []byte) (int, error) {
	n, err := k.pw.Write(p)
	k.n.Add(int64(n))
	if err != nil {
		<-k.done
		return n, errOr(k.err, err)
	}
	return n, nil
}

// finish ends the stream and waits for the downstream's verdict.
func (k *sink) finish() error {
	k.pw.Close()
	<-k.done
	return k.err
}

// abort ends the stream with err so no file becomes visible, and waits
// for the downstream call to return.
func (k *sink) abort(err error) {
	k.pw.CloseWithError(err)
	<-k.done
}

// openSink starts storing target t: locally when this server is the
// target, else through the target's store endpoint. Either way the file
// becomes visible only with the expected size and CRC.
func (s *Server) openSink(ctx context.Context, g *group, t shardrpc.RepairTarget, method string, rep *report) *sink {
	k, pr := newSink()
	go func() {
		var err error
		if t.ID == s.cfg.NodeID {
			_, err = s.shards.putVerified(g.FileID, t.Idx, pr, &shardrpc.ShardInfo{Size: t.Size, CRC: t.CRC})
			if err == nil {
				s.rep.rebuilt.WithLabelValues(method).Inc()
			}
		} else {
			_, err = s.rep.peers.StoreRebuilt(ctx, t.Addr, g.FileID, t.Idx, t.Size, t.CRC, pr)
			n := k.n.Load()
			rep.transfer(s.cfg.NodeID, t.ID, n)
			s.rep.sent.WithLabelValues(method).Add(float64(n))
			s.dataPath.Add(n)
			err = blame(t.ID, err)
		}
		if err == nil {
			rep.stored(t)
		}
		k.end(pr, err)
	}()
	return k
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// openSinks opens one sink per target; the returned close func aborts all
// unfinished ones with err (or finishes them when err is nil) and returns
// the first store error.
func (s *Server) openSinks(ctx context.Context, g *group, ts []shardrpc.RepairTarget, method string, rep *report) (map[int]*sink, func(err error) error) {
	sinks := make(map[int]*sink, len(ts))
	for _, t := range ts {
		sinks[t.Idx] = s.openSink(ctx, g, t, method, rep)
	}
	return sinks, func(err error) error {
		if err != nil {
			for _, k := range sinks {
				k.abort(err)
			}
			return err
		}
		var first error
		for _, idx := range slices.Sorted(maps.Keys(sinks)) {
			if e := sinks[idx].finish(); e != nil && first == nil {
				first = e
			}
		}
		return first
	}
}

// pipeline runs fill for slice positions 0..n-1 in one goroutine and drain
// in another, with depth slots of buffers between them: fill(i, slot)
// fills slot for position i, drain(i, slot) consumes it. The first error
// stops both.
func pipeline(ctx context.Context, n, depth int, fill, drain func(ctx context.Context, i, slot int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	free := make(chan int, depth)
	full := make(chan [2]int, depth)
	for d := range depth {
		free <- d
	}
	g.Go(func() error {
		defer close(full)
		for i := range n {
			var slot int
			select {
			case slot = <-free:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := fill(ctx, i, slot); err != nil {
				return err
			}
			select {
			case full <- [2]int{i, slot}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error {
		for is := range full {
			if err := drain(ctx, is[0], is[1]); err != nil {
				return err
			}
			free <- is[1]
		}
		return nil
	})
	return g.Wait()
}

// targetsValid checks that targets cover exactly lost, with the group's
// shard size.
func targetsValid(g *group, lost []int, ts []shardrpc.RepairTarget) error {
	if len(ts) != len(lost) {
		return fmt.Errorf("%w: %d targets for %d lost shards", shardrpc.ErrBadRequest, len(ts), len(lost))
	}
	for _, t := range ts {
		if !slices.Contains(lost, t.Idx) || t.Addr == "" {
			return fmt.Errorf("%w: target %+v is not a lost shard", shardrpc.ErrBadRequest, t)
		}
		if t.Size != g.size {
			return fmt.Errorf("%w: target %d expects %d bytes, the group's shards have %d", shardrpc.ErrBadRequest, t.Idx, t.Size, g.size)
		}
	}
	return nil
}
