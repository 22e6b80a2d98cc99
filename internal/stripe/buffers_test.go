package stripe

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/regen-s3/regen/codec"
)

// emptyBufPools takes every buffer out of the read free lists.
func emptyBufPools() {
	for c := minPoolClass; c <= maxPoolClass; c++ {
		for len(bufPools[c]) > 0 {
			getBuf(1 << c)
		}
	}
}

// collected reports whether the garbage collector has freed what w
// pointed to (a few collections: a finalizer-free object goes in one).
func collected[T any](w weak.Pointer[T]) bool {
	for range 3 {
		runtime.GC()
		if w.Value() == nil {
			return true
		}
	}
	return false
}

// TestBuffersLetGoAreFreed: a free buffer pushed out by a buffer of
// another geometry is unreachable afterwards, so the garbage collector
// frees it (a list shortened in place kept it in its backing array:
// allocated, but no longer counted in the budget).
func TestBuffersLetGoAreFreed(t *testing.T) {
	one := int64(3) * codec.StripeStride(64<<10)
	p := NewBuffers(3 * one)
	ctx := context.Background()
	var w []weak.Pointer[[][]byte]
	var bufs []*[][]byte
	for range 3 {
		b, _ := p.get(ctx, 3, 64<<10)
		bufs = append(bufs, b)
		w = append(w, weak.Make(b))
	}
	for _, b := range bufs {
		p.put(b)
	}
	bufs = nil
	// A buffer of 2 regions of 128 KiB (4/3 of one of 3 regions of
	// 64 KiB) needs two of the free ones gone: the two oldest.
	c, err := p.get(ctx, 2, 128<<10)
	if err != nil {
		t.Fatal(err)
	}
	if !collected(w[0]) || !collected(w[1]) {
		t.Error("a buffer pushed out of the free list is still reachable")
	}
	if w[2].Value() == nil {
		t.Error("the newest free buffer was let go too")
	}
	if want := one + 2*codec.StripeStride(128<<10); p.used != want || p.nfree != one {
		t.Errorf("after the swap: %d bytes used, %d free, want %d and %d", p.used, p.nfree, want, one)
	}
	p.put(c)
}

// TestBuffersIdleReleased: free buffers unused for the idle time are let
// go (budget and memory), lent ones are not, and the release runs again
// for buffers that came back later.
func TestBuffersIdleReleased(t *testing.T) {
	stride := codec.StripeStride(64 << 10)
	p := NewBuffers(100 * stride)
	p.idle = 20 * time.Millisecond
	ctx := context.Background()
	a, _ := p.get(ctx, 3, 64<<10)
	lent, _ := p.get(ctx, 3, 64<<10)
	wa := weak.Make(a)
	p.put(a)
	a = nil
	state := func() (nfree, used int64, armed bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.nfree, p.used, p.timer != nil
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("after 5 s: not %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("released", func() bool { nfree, used, armed := state(); return nfree == 0 && used == 3*stride && !armed })
	if !collected(wa) {
		t.Error("a released buffer is still reachable")
	}
	p.put(lent) // comes back later: a timer of its own
	waitFor("released again", func() bool { nfree, used, armed := state(); return nfree == 0 && used == 0 && !armed })
}

// TestBuffersTrim: trim lets go only what came back before its cutoff,
// the oldest of each geometry first.
func TestBuffersTrim(t *testing.T) {
	p := NewBuffers(1 << 30)
	ctx := context.Background()
	var got []*[][]byte
	for _, n := range []int{3, 3, 2} {
		b, _ := p.get(ctx, n, 64<<10)
		got = append(got, b)
	}
	for _, b := range got {
		p.put(b)
	}
	t0 := time.Now()
	p.mu.Lock()
	p.free[bufKey{3, 64 << 10}][0].at = t0.Add(-time.Hour)
	p.trim(t0.Add(-time.Minute))
	left := len(p.free[bufKey{3, 64 << 10}])
	kept := p.free[bufKey{3, 64 << 10}][0].b
	p.trim(t0.Add(time.Minute))
	nfree, used := p.nfree, p.used
	p.mu.Unlock()
	if left != 1 || kept != got[1] {
		t.Errorf("trim at an hour kept %d buffers of 3 regions, want the newer one", left)
	}
	if nfree != 0 || used != 0 || len(p.free) != 0 {
		t.Errorf("trim of all: %d free, %d used, %d geometries listed", nfree, used, len(p.free))
	}
}

// TestBufPoolTotal: the read free lists keep at most poolBytes across all
// size classes together (each class alone could hold that much, and a
// gateway reading objects of mixed sizes went past its memory bound), yet
// one buffer larger than the bound is still kept when nothing else is.
func TestBufPoolTotal(t *testing.T) {
	emptyBufPools()
	defer emptyBufPools()
	for c := minPoolClass; c <= 22; c++ {
		for range poolBytes >> c {
			putBuf(make([]byte, 1<<c))
		}
	}
	var sum int64
	for c := minPoolClass; c <= maxPoolClass; c++ {
		sum += int64(len(bufPools[c])) << c
	}
	if sum > poolBytes || sum != pooled.Load() {
		t.Errorf("lists hold %d bytes (counted %d), bound %d", sum, pooled.Load(), poolBytes)
	}
	if sum < poolBytes-(4<<20) {
		t.Errorf("lists hold %d bytes: the bound kept them far below %d", sum, poolBytes)
	}
	putBuf(make([]byte, 32<<20))
	if len(bufPools[25]) != 0 {
		t.Error("a 32 MiB buffer kept beside a full 16 MiB")
	}
	emptyBufPools()
	if pooled.Load() != 0 {
		t.Fatalf("empty lists counted at %d bytes", pooled.Load())
	}
	putBuf(make([]byte, 32<<20))
	if len(bufPools[25]) != 1 {
		t.Error("a 32 MiB buffer not kept in empty lists")
	}
}

// TestMemoryHeldAfterMixedSizes: after concurrent writes and reads of
// objects of mixed sizes (chunk sizes 64 KiB to 256 KiB and short last
// stripes: several size classes of read buffers and geometries of write
// buffers), what the heap still holds once they are done is at most the
// write budget plus the read free lists' bound (when that bound was per
// class, each class could keep 16 MiB of its own). TestBufPoolTotal and
// TestBuffersLetGoAreFreed check the two bounds exactly; this checks that
// nothing else stays behind.
func TestMemoryHeldAfterMixedSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MiB; skipped under -short")
	}
	code, err := codec.Parse("rs-6-3")
	if err != nil {
		t.Fatal(err)
	}
	const budget = 16 << 20
	emptyBufPools()
	defer emptyBufPools()
	before := heapAfterGC()
	bufs := NewBuffers(budget)
	const workers = 8
	for _, chunk := range []int64{128 << 10, 64 << 10, 256 << 10} {
		objs := make([]*memObject, workers)
		// All write, then all read at once: every read's stripes
		// ahead hold their buffers together.
		for _, phase := range []func(w int) error{
			func(w int) (err error) {
				// Two full stripes and a short one.
				objs[w], err = writeObject(code, chunk, 2*6*chunk+int64(w+1)*chunk/3, uint64(w), bufs)
				return err
			},
			func(w int) error { return objs[w].check() },
		} {
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					if err := phase(w); err != nil {
						errs <- fmt.Errorf("chunk %d, object %d: %w", chunk, w, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		}
	}
	held := heapAfterGC() - before
	t.Logf("held after the reads and writes: %.1f MiB (write buffers %.1f MiB, read free lists %.1f MiB)",
		float64(held)/(1<<20), float64(bufs.nfree)/(1<<20), float64(pooled.Load())/(1<<20))
	if bound := int64(budget + poolBytes + 4<<20); held > bound {
		t.Errorf("heap holds %d MiB after the requests, bound %d MiB", held>>20, bound>>20)
	}
	runtime.KeepAlive(bufs)
}

// heapAfterGC is the live heap in bytes after a collection.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// memObject is a stripe group written to shards of its own.
type memObject struct {
	mem  *memShards
	p    ReadParams
	seed uint64
	size int64
}

// writeObject writes size pseudo-random bytes (from seed) as a stripe
// group to shards of its own.
func writeObject(code codec.Code, chunk, size int64, seed uint64, bufs *Buffers) (*memObject, error) {
	o := &memObject{mem: newMem(), seed: seed, size: size}
	tg := targets(code.TotalShards())
	for _, t := range tg {
		// Shard reads take a while, as over a network, so a read's
		// stripes ahead all hold their buffers at once.
		o.mem.slow[t.Addr] = 5 * time.Millisecond
	}
	o.p = ReadParams{Code: code, ChunkSize: chunk, FileID: "f", Size: size, Targets: tg}
	_, err := Write(context.Background(), o.mem, WriteParams{Code: code, ChunkSize: chunk, FileID: "f", Targets: tg, Size: size, Buffers: bufs}, o.body())
	return o, err
}

func (o *memObject) body() io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(o.seed)}), o.size)
}

// check reads the object back whole and compares every byte.
func (o *memObject) check() error {
	want, got := md5.New(), md5.New()
	io.Copy(want, o.body())
	if err := Read(context.Background(), o.mem, o.p, 0, o.size, got); err != nil {
		return err
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		return errors.New("read back wrong bytes")
	}
	return nil
}
