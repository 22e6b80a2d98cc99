package stripe

import (
	"context"
	"runtime"
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
