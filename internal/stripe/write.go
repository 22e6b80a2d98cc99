package stripe

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/metadata"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrSize is returned when the body is shorter or longer than announced.
var ErrSize = errors.New("stripe: body size does not match its declared length")

// WriteParams describes one stripe group to write.
type WriteParams struct {
	Code      codec.Code
	ChunkSize int64 // shard chunk of a full stripe; a multiple of Code.ShardMultiple()
	FileID    string
	Targets   []Target // one per shard, in shard order
	// Quorum is how many shards must be durable for success; 0 means k+1
	// (capped at n), the architecture's write rule.
	Quorum int
	// Size is the exact body length, or -1 if unknown.
	Size int64
	// Depth is how many stripes of this write may be in flight (memory
	// is at most Depth * n * ChunkSize); 0 means 3.
	Depth int
	// Buffers, if set, lends the stripe buffers, from a budget shared
	// with other writes; nil gives this write buffers of its own.
	Buffers *Buffers
	// StallTimeout aborts a shard whose server accepts no bytes for this
	// long, so one hung server cannot stall the upload; 0 means 30s.
	StallTimeout time.Duration
	// NewMD5, if set, makes the hash of the body's MD5 (the ETag): a
	// multi-buffer hasher shared by concurrent writes, say. A hash with a
	// Close method is closed after its Sum. nil: crypto/md5.
	NewMD5 func() hash.Hash
}

// WriteResult is what a successful write produced.
type WriteResult struct {
	Size     int64
	MD5      [md5.Size]byte
	ShardCRC []uint32 // CRC-32C of each shard file's data
	OK       []bool   // which shards are durable
}

func (p *WriteParams) validate() error {
	n := p.Code.TotalShards()
	switch {
	case len(p.Targets) != n:
		return fmt.Errorf("stripe: %d targets for %d shards", len(p.Targets), n)
	case p.ChunkSize <= 0 || p.ChunkSize%int64(p.Code.ShardMultiple()) != 0:
		return fmt.Errorf("stripe: chunk size %d is not a positive multiple of %d", p.ChunkSize, p.Code.ShardMultiple())
	case p.FileID == "":
		return errors.New("stripe: empty file ID")
	}
	if p.Quorum == 0 {
		p.Quorum = min(p.Code.DataShards()+1, n)
	}
	if p.Depth <= 0 {
		p.Depth = 3
	}
	if p.StallTimeout <= 0 {
		p.StallTimeout = 30 * time.Second
	}
	return nil
}

// stripeBuf is one encoded stripe in flight; it goes back to the pool when
// the hash and every shard sender are done with it.
type stripeBuf struct {
	// full is the n shard regions of the stripe's region size (ChunkSize,
	// or less for the last stripe of a body of known size), data then
	// parity, carved by codec.NewStripe so that they start in different
	// cache sets (codec.StripeStride apart) and the kernels' streams
	// don't evict each other. They are not contiguous: the body is read
	// into the data regions in turn.
	full   [][]byte
	shards [][]byte // n views, chunk bytes each, at the starts of full
	n      int      // data bytes in this stripe
	refs   atomic.Int32
	done   func() // gives the buffer back; called once refs drop to 0
}

// fill reads r into the data regions in turn, as io.ReadFull would into
// one buffer of all of them.
func (b *stripeBuf) fill(r io.Reader, k int) (int, error) {
	got := 0
	for _, region := range b.full[:k] {
		n, err := io.ReadFull(r, region)
		got += n
		if err != nil {
			if errors.Is(err, io.EOF) && got > 0 {
				err = io.ErrUnexpectedEOF
			}
			return got, err
		}
	}
	return got, nil
}

// hash writes the stripe's data bytes, in object order, to h.
func (b *stripeBuf) hash(h hash.Hash) {
	left := b.n
	for _, s := range b.shards {
		if left == 0 {
			break
		}
		take := min(len(s), left)
		h.Write(s[:take])
		left -= take
	}
}

// shrink lays the first got bytes of an object, read into the regions in
// turn (len(regions[0]) bytes each), out as shards of chunk <= that bytes
// at the regions' starts, and zeroes each shard past got. Byte x moves from
// region x/full to region x/chunk, never an earlier one, and inside one
// region from offset x - i*full to x - i*chunk, never an earlier one; so
// when bytes move from the last back, every write lands past the places
// of the bytes still to move.
func shrink(regions [][]byte, got, chunk int64) {
	full := int64(len(regions[0]))
	if chunk < full {
		for i := int64(len(regions)) - 1; i >= 0; i-- {
			lo, x := i*chunk, min((i+1)*chunk, got)
			for x > lo { // [start, x) lies in one source region
				src := (x - 1) / full
				start := max(lo, src*full)
				copy(regions[i][start-lo:x-lo], regions[src][start-src*full:x-src*full])
				x = start
			}
		}
	}
	for i, r := range regions {
		lo := int64(i) * chunk
		clear(r[min(max(got-lo, 0), chunk):chunk])
	}
}

func (b *stripeBuf) release() {
	if b.refs.Add(-1) == 0 {
		b.done()
	}
}

// Write encodes r into a stripe group and streams every shard to its
// target. It succeeds when at least Quorum shards are durable; the shards
// that failed are reported in WriteResult.OK. On error no shard file is
// committed on purpose, but servers that finished may hold shard files the
// caller should delete: on error the result, when not nil, still tells in
// OK which shards were committed.
func Write(ctx context.Context, shards Shards, p WriteParams, r io.Reader) (*WriteResult, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	n := p.Code.TotalShards()
	w := &writer{p: p, shards: shards, cancel: cancel}
	w.senders = make([]*sender, n)
	for i := range n {
		w.senders[i] = w.startSender(ctx, i)
	}
	var md hash.Hash
	if p.NewMD5 != nil {
		md = p.NewMD5()
	} else {
		md = md5.New()
	}
	if c, ok := md.(interface{ Close() }); ok {
		defer c.Close()
	}
	hashed := make(chan *stripeBuf, p.Depth)
	hashDone := make(chan struct{})
	go func() {
		defer close(hashDone)
		for b := range hashed {
			b.hash(md)
			b.release()
		}
	}()

	size, readErr := w.produce(ctx, r, hashed)
	if readErr != nil {
		// Abort every shard stream so servers discard their temp files.
		// NB: before the senders' inputs close: a sender that saw its
		// input end with no cause would end its stream cleanly, and the
		// server would commit a shard of a write that failed (an orphan
		// the gateway believes was never stored).
		cancel(readErr)
	}
	close(hashed)
	for _, s := range w.senders {
		close(s.in)
	}
	<-hashDone
	res := &WriteResult{Size: size, ShardCRC: make([]uint32, n), OK: make([]bool, n)}
	var errs []error
	for i, s := range w.senders {
		<-s.done
		res.ShardCRC[i] = s.crc
		if s.err == nil {
			res.OK[i] = true
		} else {
			errs = append(errs, &ShardError{Index: i, Node: p.Targets[i].Node, Err: s.err})
		}
	}
	copy(res.MD5[:], md.Sum(nil))
	if readErr != nil {
		return res, readErr
	}
	if got := n - len(errs); got < p.Quorum {
		return res, &QuorumError{Op: "write", Want: p.Quorum, Got: got, Errs: errs}
	}
	return res, nil
}

type writer struct {
	p      WriteParams
	shards Shards
	cancel context.CancelCauseFunc
	failed atomic.Int32

	senders []*sender
}

// lastChunk is the shard chunk of a stripe holding the last size bytes of
// a body (size < k * ChunkSize): size spread over k shards, rounded up to
// the code's multiple.
func (w *writer) lastChunk(size int64) int64 {
	k, mult := int64(w.p.Code.DataShards()), int64(w.p.Code.ShardMultiple())
	per := (size + k - 1) / k
	return (per + mult - 1) / mult * mult
}

// buffer waits for a slot among this write's Depth stripes in flight and
// for a buffer of n regions of region bytes.
func (w *writer) buffer(ctx context.Context, bufs *Buffers, slots chan struct{}, region int64) (*stripeBuf, error) {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	n := w.p.Code.TotalShards()
	alloc, err := bufs.get(ctx, n, region)
	if err != nil {
		<-slots
		return nil, err
	}
	b := &stripeBuf{full: make([][]byte, n), shards: make([][]byte, n)}
	for i, reg := range *alloc {
		b.full[i] = reg[:region]
	}
	b.done = func() {
		bufs.put(alloc)
		<-slots
	}
	return b, nil
}

// produce reads stripes from r, encodes them and hands them to the hash and
// the senders. It returns the body size and the first read error.
func (w *writer) produce(ctx context.Context, r io.Reader, hashed chan<- *stripeBuf) (int64, error) {
	p := w.p
	n, k := p.Code.TotalShards(), p.Code.DataShards()
	bufs := p.Buffers
	if bufs == nil {
		bufs = NewBuffers(int64(p.Depth*n) * codec.StripeStride(bufChunk(p.ChunkSize)))
	}
	slots := make(chan struct{}, p.Depth)
	var total int64
	for first := true; ; first = false {
		// A body of known size needs no more than its last bytes' chunk
		// for its last stripe (a 1 MiB object: 171 KiB shards, not 1 MiB).
		region := p.ChunkSize
		if rem := p.Size - total; p.Size >= 0 && rem < int64(k)*p.ChunkSize {
			region = max(w.lastChunk(rem), int64(p.Code.ShardMultiple()))
		}
		b, err := w.buffer(ctx, bufs, slots, region)
		if err != nil {
			return total, err
		}
		got, err := b.fill(r, k)
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			err = nil
		case err != nil:
			b.done()
			return total, fmt.Errorf("stripe: reading body: %w", err)
		}
		total += int64(got)
		if p.Size >= 0 && total > p.Size {
			b.done()
			return total, fmt.Errorf("%w: more than %d bytes", ErrSize, p.Size)
		}
		last := int64(got) < int64(k)*p.ChunkSize
		if got == 0 && !first {
			b.done()
			break
		}
		chunk := p.ChunkSize
		if last {
			chunk = w.lastChunk(int64(got))
			shrink(b.full[:k], int64(got), chunk)
		}
		for i := range n {
			b.shards[i] = b.full[i][:chunk]
		}
		if chunk > 0 {
			if err := p.Code.Encode(b.shards); err != nil {
				b.done()
				return total, fmt.Errorf("stripe: encode: %w", err)
			}
		}
		b.n = got
		b.refs.Store(int32(n + 1))
		hashed <- b
		for _, s := range w.senders {
			s.in <- b
		}
		if int(w.failed.Load()) > n-p.Quorum {
			return total, w.quorumLost()
		}
		if last {
			break
		}
		if p.Size >= 0 && total == p.Size {
			// Do not wait for a read that would block on a client
			// that has sent everything.
			break
		}
	}
	if p.Size >= 0 && total != p.Size {
		return total, fmt.Errorf("%w: got %d of %d bytes", ErrSize, total, p.Size)
	}
	return total, nil
}

func (w *writer) quorumLost() error {
	var errs []error
	for i, s := range w.senders {
		if e := s.loadErr(); e != nil {
			errs = append(errs, &ShardError{Index: i, Node: w.p.Targets[i].Node, Err: e})
		}
	}
	n := w.p.Code.TotalShards()
	return &QuorumError{Op: "write", Want: w.p.Quorum, Got: n - len(errs), Errs: errs}
}

// sender streams one shard to its server through a pipe.
type sender struct {
	in   chan *stripeBuf
	done chan struct{}
	crc  uint32

	mu  sync.Mutex
	err error
}

func (s *sender) setErr(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		return true
	}
	return false
}

func (s *sender) loadErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (w *writer) startSender(ctx context.Context, i int) *sender {
	s := &sender{in: make(chan *stripeBuf, w.p.Depth), done: make(chan struct{})}
	t := w.p.Targets[i]
	if t.Addr == "" {
		s.setErr(errors.New("server not reachable"))
		w.failed.Add(1)
		go func() {
			defer close(s.done)
			crc := uint32(0)
			for b := range s.in {
				crc = crc32.Update(crc, castagnoli, b.shards[i])
				b.release()
			}
			s.crc = crc
		}()
		return s
	}
	sctx, scancel := context.WithCancelCause(ctx)
	body := newChunkStream()
	putDone := make(chan error, 1)
	go func() {
		_, err := w.shards.PutShard(sctx, t.Addr, w.p.FileID, i, body)
		body.Close()
		putDone <- err
	}()
	go func() {
		defer close(s.done)
		defer scancel(nil)
		crc := uint32(0)
		fail := func(err error) {
			if s.setErr(err) {
				w.failed.Add(1)
			}
			scancel(err)
		}
		for b := range s.in {
			chunk := b.shards[i]
			// The CRC covers what the shard should hold even when its
			// server failed: the manifest records it, and the repair that
			// rebuilds the missing shard is verified against it.
			crc = crc32.Update(crc, castagnoli, chunk)
			if s.loadErr() == nil {
				timer := time.AfterFunc(w.p.StallTimeout, func() {
					fail(fmt.Errorf("server accepted no data for %s", w.p.StallTimeout))
				})
				err := body.write(chunk)
				timer.Stop()
				if err != nil {
					fail(err)
				}
			}
			b.release()
		}
		body.finish(context.Cause(ctx))
		if err := <-putDone; err != nil {
			fail(err)
		}
		s.crc = crc
	}()
	return s
}

// Geometry returns the stripe geometry of a code and chunk size.
func Geometry(c codec.Code, chunk int64) metadata.StripeGeometry {
	return metadata.StripeGeometry{K: c.DataShards(), ChunkSize: chunk, Multiple: int64(c.ShardMultiple())}
}
