package stripe

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// memShards is an in-memory fake of the shard servers with fault hooks.
type memShards struct {
	mu      sync.Mutex
	files   map[string][]byte // addr/file/idx -> data
	down    map[string]bool   // addr -> refuses everything
	corrupt map[string]bool   // addr -> GETs fail as corrupt
	// slow: addr -> GETs answer after this long (or when cancelled,
	// whichever comes first): a hung or overloaded server.
	slow map[string]time.Duration
	// failAt: addr -> a GET stream fails when it reaches this offset of
	// the shard file (a server killed, or a bad block, mid-stream).
	failAt map[string]int64
	gets   int   // GetShard requests
	served int64 // bytes read from them
}

func newMem() *memShards {
	return &memShards{files: map[string][]byte{}, down: map[string]bool{}, corrupt: map[string]bool{}, slow: map[string]time.Duration{}, failAt: map[string]int64{}}
}

// fault changes the fault hooks under the lock: fetches of an earlier
// Read that lost a hedge may still be running.
func (m *memShards) fault(f func(m *memShards)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

func name(addr, id string, idx int) string { return fmt.Sprintf("%s/%s/%d", addr, id, idx) }

func (m *memShards) PutShard(ctx context.Context, addr, fileID string, idx int, body io.Reader) (shardrpc.ShardInfo, error) {
	m.mu.Lock()
	down := m.down[addr]
	m.mu.Unlock()
	if down {
		io.Copy(io.Discard, body)
		return shardrpc.ShardInfo{}, errors.New("connection refused")
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return shardrpc.ShardInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[name(addr, fileID, idx)] = b
	return shardrpc.ShardInfo{Size: int64(len(b))}, nil
}

func (m *memShards) GetShard(ctx context.Context, addr, fileID string, idx int, off, length int64) (io.ReadCloser, error) {
	m.mu.Lock()
	d := m.slow[addr]
	m.mu.Unlock()
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	if m.down[addr] {
		return nil, errors.New("connection refused")
	}
	if m.corrupt[addr] {
		return nil, shardrpc.ErrCorrupt
	}
	b, ok := m.files[name(addr, fileID, idx)]
	if !ok {
		return nil, shardrpc.ErrNotFound
	}
	if off+length > int64(len(b)) {
		return nil, errors.New("range outside shard")
	}
	body := b[off : off+length]
	var err error
	if at, ok := m.failAt[addr]; ok && at < off+length {
		body, err = b[off:max(off, at)], shardrpc.ErrCorrupt
	}
	return io.NopCloser(&memStream{m: m, body: body, err: err}), nil
}

// memStream is a memShards GET's body: it counts the bytes read, and ends
// with err (nil: io.EOF) after body.
type memStream struct {
	m    *memShards
	body []byte
	err  error
}

func (s *memStream) Read(p []byte) (int, error) {
	if len(s.body) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		return 0, io.EOF
	}
	n := copy(p, s.body)
	s.body = s.body[n:]
	s.m.mu.Lock()
	s.m.served += int64(n)
	s.m.mu.Unlock()
	return n, nil
}

func targets(n int) []Target {
	out := make([]Target, n)
	for i := range out {
		out[i] = Target{Node: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("a%d", i)}
	}
	return out
}

// Objects of every shape of last stripe (none, one byte, one short of
// full, a few bytes in the first shard only, spread over some shards) go
// through Write and come back from Read whole, healthy and degraded. The
// body arrives a few bytes per Read, as from a network, so filling the
// stripe's separate shard regions is exercised too.
func TestWriteReadRoundTrip(t *testing.T) {
	for _, name := range []string{"rs-6-3", "clay-6-3"} {
		code, err := codec.Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) { roundTrip(t, code) })
	}
}

func roundTrip(t *testing.T, code codec.Code) {
	chunk := codec.ChunkSize(code, 4096)
	full := 6 * chunk
	sizes := []int64{0, 1, 100, full - 1, full, full + 1, full/2 + 5, 2*full + full*5/7, 3*full + 17}
	// One pool for all sizes, as in a gateway: every write after the
	// first gets buffers holding an earlier object's bytes, which must
	// not leak into its shards.
	bufs := NewBuffers(2 * 9 * codec.StripeStride(bufChunk(chunk)))
	for _, size := range sizes {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(rand.IntN(256))
			}
			mem := newMem()
			tg := targets(9)
			res, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: tg, Size: size, Buffers: bufs}, iotest.HalfReader(bytes.NewReader(data)))
			if err != nil {
				t.Fatal(err)
			}
			if res.Size != size {
				t.Fatalf("size %d, want %d", res.Size, size)
			}
			if res.MD5 != md5.Sum(data) {
				t.Fatalf("MD5 %x, want %x", res.MD5, md5.Sum(data))
			}
			geo := Geometry(code, chunk)
			for i := range 9 {
				if got := int64(len(mem.files[name(tg[i].Addr, "f", i)])); got != geo.ShardFileSize(size) {
					t.Fatalf("shard %d has %d bytes, geometry says %d", i, got, geo.ShardFileSize(size))
				}
			}
			check := func(label string, off, length int64) {
				t.Helper()
				var buf bytes.Buffer
				err := Read(context.Background(), mem, ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: size, Targets: tg}, off, length, &buf)
				if err != nil {
					t.Fatalf("%s: read %d+%d: %v", label, off, length, err)
				}
				if !bytes.Equal(buf.Bytes(), data[off:off+length]) {
					t.Fatalf("%s: read %d+%d: wrong bytes", label, off, length)
				}
			}
			ranges := [][2]int64{{0, size}}
			if size > 2 {
				ranges = append(ranges, [2]int64{1, size - 2}, [2]int64{size / 2, size - size/2})
			}
			for _, r := range ranges {
				check("healthy", r[0], r[1])
			}
			// Three servers down (n-k) and one corrupt would be too many;
			// take down 2 data servers and mark one parity corrupt.
			mem.fault(func(m *memShards) {
				m.down["a0"], m.down["a4"] = true, true
				m.corrupt["a7"] = true
			})
			for _, r := range ranges {
				check("degraded", r[0], r[1])
			}
			mem.fault(func(m *memShards) { m.down["a1"] = true })
			if size > 0 {
				err := Read(context.Background(), mem, ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: size, Targets: tg}, 0, size, io.Discard)
				if !errors.Is(err, ErrQuorum) {
					t.Fatalf("4 of 9 shards gone: want ErrQuorum, got %v", err)
				}
			}
		})
	}
}

func TestWriteQuorum(t *testing.T) {
	code, _ := codec.Parse("rs-6-3")
	data := bytes.Repeat([]byte("x"), 100000)
	for _, down := range []int{0, 2, 3} {
		mem := newMem()
		tg := targets(9)
		for i := range down {
			mem.down[tg[i].Addr] = true
		}
		if down > 0 {
			tg[0].Addr = "" // known dead: never even contacted
		}
		res, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: 4096, FileID: "f", Targets: tg, Size: int64(len(data))}, bytes.NewReader(data))
		switch {
		case down <= 2 && err != nil:
			t.Fatalf("%d servers down: k+1=7 shards are reachable, want success, got %v", down, err)
		case down == 3 && !errors.Is(err, ErrQuorum):
			t.Fatalf("3 servers down leaves 6 < k+1: want ErrQuorum, got %v", err)
		}
		if err == nil {
			for i, ok := range res.OK {
				if ok == (i < down) {
					t.Fatalf("%d down: OK[%d] = %v", down, i, ok)
				}
			}
			// Shards that could not be stored still get their CRC: a
			// repair rebuilding them is verified against it.
			healthy := mem.files[name(tg[8].Addr, "f", 8)]
			if res.ShardCRC[8] != crc32.Checksum(healthy, castagnoli) {
				t.Fatalf("%d down: CRC of a stored shard is wrong", down)
			}
			for i := range down {
				if res.ShardCRC[i] == 0 {
					t.Fatalf("%d down: shard %d that failed has no CRC", down, i)
				}
			}
		}
	}
}

func TestWriteShortBody(t *testing.T) {
	code, _ := codec.Parse("rs-6-3")
	mem := newMem()
	_, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: 4096, FileID: "f", Targets: targets(9), Size: 50000}, bytes.NewReader(make([]byte, 40000)))
	if !errors.Is(err, ErrSize) {
		t.Fatalf("want ErrSize for a short body, got %v", err)
	}
}

// A read of a small range inside one data shard asks only that shard.
func TestReadTouchesOnlyNeededShards(t *testing.T) {
	code, _ := codec.Parse("rs-6-3")
	mem := newMem()
	data := make([]byte, 6*4096)
	tg := targets(9)
	if _, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: 4096, FileID: "f", Targets: tg, Size: int64(len(data))}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	mem.gets = 0
	if err := Read(context.Background(), mem, ReadParams{Code: code, ChunkSize: 4096, FileID: "f", Size: int64(len(data)), Targets: tg}, 5000, 100, io.Discard); err != nil {
		t.Fatal(err)
	}
	if mem.gets != 1 {
		t.Fatalf("ranged read inside one shard made %d shard requests, want 1", mem.gets)
	}
}

// A hung server holding a needed data shard does not stall a read: after
// the hedge delay one more shard is asked for and the stripe decodes from
// the first k; later stripes do without the hung server from the start.
// The table covers a hung data server, a hung server plus a dead one, and
// hedging turned off (the read then waits for the shard timeout).
func TestReadHedgesAroundSlowShard(t *testing.T) {
	code, err := codec.Parse("rs-6-3")
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 4096
	size := int64(6*chunk*8 + 100) // 9 stripes
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	tests := []struct {
		name    string
		slow    []string
		down    []string
		hedge   time.Duration
		timeout time.Duration
		atMost  time.Duration // whole read
		atLeast time.Duration
	}{
		// The bounds tell "hedged" (milliseconds) from "waited for the
		// 60 s shard timeout" with a wide margin, so a loaded machine does
		// not fail them; speed itself is measured by benchmarks.
		{name: "one hung data server", slow: []string{"a2"}, timeout: time.Minute, atMost: 15 * time.Second},
		{name: "hung and dead data servers", slow: []string{"a1"}, down: []string{"a3"}, timeout: time.Minute, atMost: 15 * time.Second},
		{name: "fixed short hedge", slow: []string{"a0"}, hedge: 20 * time.Millisecond, timeout: time.Minute, atMost: 15 * time.Second},
		{name: "hedging off waits for the timeout", slow: []string{"a2"}, hedge: -1, timeout: 300 * time.Millisecond, atLeast: 300 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem()
			tg := targets(9)
			if _, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: tg, Size: size}, bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.slow {
				mem.slow[a] = time.Hour
			}
			for _, a := range tc.down {
				mem.down[a] = true
			}
			var buf bytes.Buffer
			t0 := time.Now()
			err := Read(context.Background(), mem, ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: size, Targets: tg,
				HedgeDelay: tc.hedge, ShardTimeout: tc.timeout}, 0, size, &buf)
			took := time.Since(t0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), data) {
				t.Fatal("wrong bytes")
			}
			if tc.atMost > 0 && took > tc.atMost {
				t.Errorf("read took %s, want at most %s", took, tc.atMost)
			}
			if took < tc.atLeast {
				t.Errorf("read took %s, want at least %s", took, tc.atLeast)
			}
		})
	}
}

// With every server healthy and fast, nothing is hedged: a read fetches
// only the data shards it needs.
func TestReadNoHedgeWhenHealthy(t *testing.T) {
	code, _ := codec.Parse("rs-6-3")
	const chunk = 4096
	size := int64(6 * chunk * 4)
	data := make([]byte, size)
	mem := newMem()
	tg := targets(9)
	if _, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: tg, Size: size}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	mem.gets = 0
	if err := Read(context.Background(), mem, ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: size, Targets: tg}, 0, size, io.Discard); err != nil {
		t.Fatal(err)
	}
	mem.mu.Lock()
	gets, served := mem.gets, mem.served
	mem.mu.Unlock()
	// One stream per data shard across the 4 stripes, not one request per
	// stripe per shard.
	if gets != 6 {
		t.Errorf("%d shard GETs, want 6 (a stream per data shard, no hedges)", gets)
	}
	if served != size {
		t.Errorf("%d shard bytes read, want %d", served, size)
	}
}

// A shard stream that fails midway (its server killed, a bad block) is
// replaced by a parity stream from that stripe on: the read returns the
// right bytes, each stripe after the failure is reported degraded, and no
// stripe asks the failed server again.
func TestReadStreamFailsMidway(t *testing.T) {
	code, _ := codec.Parse("rs-6-3")
	const chunk = 4096
	size := int64(6*chunk*9 - 1000) // 9 stripes, the last short
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	mem := newMem()
	tg := targets(9)
	if _, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: tg, Size: size}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	mem.fault(func(m *memShards) {
		m.gets = 0
		m.failAt["a1"] = 3*chunk + 100 // in stripe 3
	})
	var mu sync.Mutex
	degraded := 0
	var buf bytes.Buffer
	// NB: hedging off: a hedge on a loaded machine would open one more
	// stream and make the count below vary.
	err := Read(context.Background(), mem, ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: size, Targets: tg, HedgeDelay: -1,
		OnDegraded: func(d Degraded) {
			mu.Lock()
			defer mu.Unlock()
			degraded++
		}}, 0, size, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Fatal("wrong bytes")
	}
	if degraded != 6 {
		t.Errorf("%d stripes reported degraded, want 6 (stripes 3 to 8)", degraded)
	}
	mem.mu.Lock()
	gets := mem.gets
	mem.mu.Unlock()
	if gets != 7 {
		t.Errorf("%d shard GETs, want 7 (six data streams, one parity stream from stripe 3)", gets)
	}
}

// Random ranges of an object read healthy, with a server down, and with
// streams failing midway at random offsets, come back right.
func TestReadRandomRangesWithFaults(t *testing.T) {
	code, _ := codec.Parse("rs-6-3")
	const chunk = 4096
	size := int64(6*chunk*7 + 5000)
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	mem := newMem()
	tg := targets(9)
	if _, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: tg, Size: size}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	shardLen := Geometry(code, chunk).ShardFileSize(size)
	for round := range 200 {
		mem.fault(func(m *memShards) {
			clear(m.down)
			clear(m.failAt)
			switch round % 4 {
			case 1:
				m.down[fmt.Sprintf("a%d", rand.IntN(9))] = true
			case 2, 3:
				for range 1 + round%3 {
					m.failAt[fmt.Sprintf("a%d", rand.IntN(9))] = rand.Int64N(shardLen)
				}
			}
		})
		off := rand.Int64N(size)
		length := rand.Int64N(size-off) + 1
		var buf bytes.Buffer
		err := Read(context.Background(), mem, ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: size, Targets: tg, Depth: 1 + round%3}, off, length, &buf)
		if err != nil {
			t.Fatalf("round %d: read %d+%d: %v", round, off, length, err)
		}
		if !bytes.Equal(buf.Bytes(), data[off:off+length]) {
			t.Fatalf("round %d: read %d+%d: wrong bytes", round, off, length)
		}
	}
}

// shrink must turn an object read into full-size regions in turn into
// shards of the last stripe's smaller chunk, zero-padded, for any shape.
func TestShrink(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		k := 1 + rng.IntN(20)
		full := int64(1 + rng.IntN(300))
		got := rng.Int64N(int64(k)*full + 1)
		mult := 1 + rng.Int64N(full)
		chunk := ((got+int64(k)-1)/int64(k) + mult - 1) / mult * mult
		if chunk > full {
			continue // Write's ChunkSize is a multiple of the shard multiple
		}
		obj := make([]byte, got)
		for i := range obj {
			obj[i] = byte(rng.IntN(255) + 1)
		}
		regions := codec.NewStripe(k, full)
		for _, r := range regions {
			for j := range r {
				r[j] = 0xEE // what the previous stripe left
			}
		}
		for x := int64(0); x < got; x++ {
			regions[x/full][x%full] = obj[x]
		}
		shrink(regions, got, chunk)
		for i, r := range regions {
			for j := int64(0); j < chunk; j++ {
				x, want := int64(i)*chunk+j, byte(0)
				if x < got {
					want = obj[x]
				}
				if r[j] != want {
					t.Fatalf("k=%d full=%d got=%d chunk=%d: shard %d byte %d is %#x, want %#x", k, full, got, chunk, i, j, r[j], want)
				}
			}
		}
	}
}

// TestWriteUnknownSizeSharedBuffers writes bodies of unknown size (their
// last stripe is shrunk in place) through one small pool, so that buffers
// come back dirty, and reads them back whole.
func TestWriteUnknownSizeSharedBuffers(t *testing.T) {
	code, _ := codec.Parse("rs-6-3")
	chunk := codec.ChunkSize(code, 4096)
	bufs := NewBuffers(1) // one buffer at a time
	for _, size := range []int64{3*6*chunk + 5, 100, 6*chunk - 1, 1} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rand.IntN(256))
		}
		mem, tg := newMem(), targets(9)
		if _, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: tg, Size: -1, Buffers: bufs}, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		mem.down["a2"] = true // decode, so parity must be right too
		if err := Read(context.Background(), mem, ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: size, Targets: tg}, 0, size, &buf); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("size %d: wrong bytes back", size)
		}
	}
}

// TestBuffersBudget: buffers past the budget wait for one to come back
// (or for their context), free buffers are reused, and free buffers of
// another geometry make room.
func TestBuffersBudget(t *testing.T) {
	one := int64(3) * codec.StripeStride(64<<10)
	p := NewBuffers(2 * one)
	ctx := context.Background()
	a, err := p.get(ctx, 3, 1000)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.get(ctx, 3, 64<<10)
	if len(*a) != 3 || int64(len((*a)[0])) != 64<<10 {
		t.Fatalf("buffer of %d regions of %d bytes", len(*a), len((*a)[0]))
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.get(short, 3, 64<<10); err == nil {
		t.Fatal("a third buffer fit in a budget of two")
	}
	got := make(chan *[][]byte)
	go func() {
		c, _ := p.get(ctx, 3, 64<<10)
		got <- c
	}()
	select {
	case <-got:
		t.Fatal("got a buffer before one came back")
	case <-time.After(50 * time.Millisecond):
	}
	p.put(a)
	var c *[][]byte
	select {
	case c = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("waiting get not woken by put")
	}
	if &(*c)[0][0] != &(*a)[0][0] {
		t.Error("the returned buffer was not reused")
	}
	// Both lent out; return one, then ask for another geometry: the free
	// one must give way.
	p.put(b)
	d, err := p.get(short, 2, 64<<10)
	if err != nil {
		t.Fatalf("free buffer of another geometry did not make room: %v", err)
	}
	if len(*d) != 2 {
		t.Fatalf("got %d regions, want 2", len(*d))
	}
	// A single buffer larger than the whole budget is still lent.
	big, err := NewBuffers(1).get(ctx, 9, 1<<20)
	if err != nil || len(*big) != 9 {
		t.Fatalf("oversized buffer: %v", err)
	}
}

// TestBufPool: buffers come back by size class, reused, and each class
// keeps a bounded number.
func TestBufPool(t *testing.T) {
	b := getBuf(1000 << 10)
	if len(b) != 1000<<10 || cap(b) != 1<<20 {
		t.Fatalf("getBuf(1000 KiB): len %d cap %d", len(b), cap(b))
	}
	emptyBufPools() // start from empty lists
	putBuf(b)
	if c := getBuf(1 << 20); &c[0] != &b[0] {
		t.Error("a returned buffer was not reused")
	}
	for range 2 * cap(bufPools[20]) {
		putBuf(make([]byte, 1<<20))
	}
	if len(bufPools[20]) != cap(bufPools[20]) || cap(bufPools[20]) != poolBytes>>20 {
		t.Errorf("class 1 MiB keeps %d of at most %d buffers", len(bufPools[20]), poolBytes>>20)
	}
	putBuf(make([]byte, 3000)) // not a power of two: ignored
	putBuf(nil)
}

// closingMD5 is crypto/md5 that records whether it was closed.
type closingMD5 struct {
	hash.Hash
	closed *atomic.Bool
}

func (c closingMD5) Close() { c.closed.Store(true) }

// TestWriteNewMD5: a write hashes its ETag with WriteParams.NewMD5 when
// given (the gateway's multi-buffer hasher), and closes a hash that has a
// Close method once it has its sum.
func TestWriteNewMD5(t *testing.T) {
	code, err := codec.Parse("rs-6-3")
	if err != nil {
		t.Fatal(err)
	}
	chunk := codec.ChunkSize(code, 4096)
	data := make([]byte, 3*6*chunk+5)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	var made int
	var closed atomic.Bool
	p := WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: targets(9), Size: int64(len(data)),
		NewMD5: func() hash.Hash { made++; return closingMD5{Hash: md5.New(), closed: &closed} }}
	res, err := Write(context.Background(), newMem(), p, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if made != 1 || !closed.Load() {
		t.Fatalf("NewMD5 called %d times, hash closed %v; want once, closed", made, closed.Load())
	}
	if res.MD5 != md5.Sum(data) {
		t.Fatalf("MD5 %x, want %x", res.MD5, md5.Sum(data))
	}
}
