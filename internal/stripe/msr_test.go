package stripe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/regen-s3/regen/codec"
	"github.com/regen-s3/regen/internal/shardrpc"
)

// helperMem adds the repair helper endpoint to memShards, computed as a
// shard server does (codec.HelperTask.Produce on the stored chunk).
type helperMem struct {
	*memShards
	codes codec.Registry
	mu    sync.Mutex
	asked map[string]int // addr -> helper requests
	fail  map[string]bool
}

func (h *helperMem) RepairHelper(ctx context.Context, addr string, req shardrpc.HelperRequest) (io.ReadCloser, error) {
	h.mu.Lock()
	h.asked[addr]++
	fail := h.fail[addr]
	h.mu.Unlock()
	if fail {
		return nil, errors.New("connection refused")
	}
	c, err := h.codes.Get(req.Code)
	if err != nil {
		return nil, err
	}
	plan, err := h.codes.RepairPlan(req.Code, req.Lost)
	if err != nil {
		return nil, err
	}
	task := plan.Helper(req.Idx)
	if task == nil {
		return nil, errors.New("shard sends nothing")
	}
	h.memShards.mu.Lock()
	file, ok := h.files[name(addr, req.FileID, req.Idx)]
	h.memShards.mu.Unlock()
	if !ok {
		return nil, shardrpc.ErrNotFound
	}
	geo := Geometry(c, req.ChunkSize)
	var out []byte
	for s := req.First; s < req.First+req.Count; s++ {
		chunk, _ := geo.Chunk(req.PartSize, s)
		if out, err = task.Produce(c.SubChunks(), file[s*req.ChunkSize:s*req.ChunkSize+chunk], out); err != nil {
			return nil, err
		}
	}
	return io.NopCloser(bytes.NewReader(out)), nil
}

// A ranged read inside the lost data shard of a Clay stripe rebuilds that
// chunk from the other n-1 shards' repair sub-chunks (d*beta of them)
// instead of decoding from k whole chunks, and reports the bytes. A read
// that needs most data shards anyway decodes; a helper that fails makes
// the stripe fall back to decoding, byte-exact all the same.
func TestReadRebuildsLostShardLikeARepair(t *testing.T) {
	code, err := codec.Parse("clay-6-3")
	if err != nil {
		t.Fatal(err)
	}
	k, alpha := code.DataShards(), code.SubChunks()
	chunk := int64(alpha * 64)
	full := int64(k) * chunk
	size := 3*full + 1000 // three full stripes and a short one
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	h := &helperMem{memShards: newMem(), asked: map[string]int{}, fail: map[string]bool{}}
	tg := targets(9)
	if _, err := Write(context.Background(), h, WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: tg, Size: size}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	const lost = 2
	tg[lost].Addr = "" // known dead
	read := func(off, length int64) map[string]int64 {
		t.Helper()
		moved := map[string]int64{}
		var mu sync.Mutex
		var buf bytes.Buffer
		err := Read(context.Background(), h, ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: size, Targets: tg,
			OnDegraded: func(d Degraded) { mu.Lock(); moved[d.Method] += d.Bytes; mu.Unlock() }}, off, length, &buf)
		if err != nil {
			t.Fatalf("read %d+%d: %v", off, length, err)
		}
		if !bytes.Equal(buf.Bytes(), data[off:off+length]) {
			t.Fatalf("read %d+%d: wrong bytes", off, length)
		}
		return moved
	}
	// d = 8 helpers, beta = alpha/3 sub-chunks each: 8/3 of a chunk.
	msr := 8 * int64(alpha/3) * (chunk / int64(alpha))

	// Inside the lost chunk of stripe 1.
	got := read(full+lost*chunk+10, chunk-20)
	if got[MethodMSR] != msr || got[MethodDecode] != 0 {
		t.Errorf("read inside the lost chunk moved %v, want %d by msr", got, msr)
	}
	// From the lost chunk of stripe 1 to that of stripe 2: the other
	// chunks' bytes are read as they are.
	got = read(full+lost*chunk, full+chunk)
	if want := 2*msr + 5*chunk; got[MethodMSR] != want || got[MethodDecode] != 0 {
		t.Errorf("read across two stripes moved %v, want %d by msr", got, want)
	}
	// The lost chunk and four healthy chunks' worth: 8/3+4 chunks are
	// more than decoding's k = 6.
	got = read(full+chunk/2, 5*chunk)
	if got[MethodDecode] != int64(k)*chunk || got[MethodMSR] != 0 {
		t.Errorf("read of the lost chunk and 4 healthy ones moved %v, want %d by decode", got, int64(k)*chunk)
	}
	// A whole stripe needs every data shard: decoding reads less.
	got = read(0, full)
	if got[MethodDecode] != int64(k)*chunk || got[MethodMSR] != 0 {
		t.Errorf("whole-stripe read moved %v, want %d by decode", got, int64(k)*chunk)
	}
	// The short last stripe.
	last, _ := Geometry(code, chunk).Chunk(size, 3)
	got = read(3*full+lost*last+5, 100)
	if got[MethodMSR] == 0 {
		t.Errorf("read of the short stripe moved %v, want msr", got)
	}
	// A helper fails: decode instead.
	h.fail[tg[7].Addr] = true
	got = read(lost*chunk, chunk)
	if got[MethodDecode] < int64(k)*chunk {
		t.Errorf("with a failed helper moved %v, want a decode", got)
	}
}
