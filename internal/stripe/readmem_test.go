package stripe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/regen-s3/regen/codec"
)

// gatedWriter collects what it is written, each Write waiting for gate.
type gatedWriter struct {
	gate chan struct{}
	buf  bytes.Buffer
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	<-w.gate
	return w.buf.Write(p)
}

// Reads sharing a ReadMemory whose clients stop reading hold at most the
// budget between them (a third read waits for memory rather than fetch),
// all complete once the clients read again, and every byte of the budget
// comes back, also from a read whose client went away.
func TestReadMemoryBound(t *testing.T) {
	code, _ := codec.Parse("rs-6-3")
	const chunk = 4096
	stripeCost := int64(6 * chunk)
	mem := newMem()
	tg := targets(9)
	data := make([]byte, 8*stripeCost)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	if _, err := Write(context.Background(), mem, WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: tg, Size: int64(len(data))}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	mem.fault(func(m *memShards) { m.served = 0 })
	budget := NewReadMemory(2 * stripeCost)
	p := ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: int64(len(data)), Targets: tg, Memory: budget}
	// NB: bytes read, not requests: a read streams each shard across its
	// stripes.
	served := func() int64 {
		mem.mu.Lock()
		defer mem.mu.Unlock()
		return mem.served
	}

	gate := make(chan struct{})
	ws := make([]*gatedWriter, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range ws {
		ws[i] = &gatedWriter{gate: gate}
		wg.Go(func() { errs[i] = Read(context.Background(), mem, p, 0, int64(len(data)), ws[i]) })
	}
	// Two stripes (6 shards each) fit; the reads stop there.
	deadline := time.Now().Add(10 * time.Second)
	for served() < 2*stripeCost && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // room for a fetch past the budget, if any
	if n := served(); n != 2*stripeCost {
		t.Fatalf("three reads whose clients read nothing fetched %d shard bytes, want %d (two stripes of budget)", n, 2*stripeCost)
	}
	if budget.sem.TryAcquire(1) {
		t.Fatal("the budget is not spent while two stripes wait for their clients")
	}
	close(gate)
	wg.Wait()
	for i, w := range ws {
		if errs[i] != nil || !bytes.Equal(w.buf.Bytes(), data) {
			t.Fatalf("read %d: %v, %d bytes", i, errs[i], w.buf.Len())
		}
	}
	if !budget.sem.TryAcquire(2 * stripeCost) {
		t.Fatal("memory not given back after the reads")
	}
	budget.sem.Release(2 * stripeCost)

	// A client that goes away mid-read: the stripes fetched ahead are
	// given back too.
	failing := writerFunc(func(p []byte) (int, error) { return 0, errors.New("client went away") })
	if err := Read(context.Background(), mem, p, 0, int64(len(data)), failing); err == nil {
		t.Fatal("read to a failing client succeeded")
	}
	if !budget.sem.TryAcquire(2 * stripeCost) {
		t.Fatal("memory not given back after a failed read")
	}
	budget.sem.Release(2 * stripeCost)

	// A stripe larger than the whole budget is still read (alone).
	small := NewReadMemory(chunk)
	p.Memory = small
	var out bytes.Buffer
	if err := Read(context.Background(), mem, p, 0, int64(len(data)), &out); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("read with a budget under one stripe: %v, %d bytes", err, out.Len())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

var _ io.Writer = writerFunc(nil)
