package stripe

import (
	"math/bits"
	"sync/atomic"
)

// Shard buffers of the read path come from free lists by power-of-two size
// class, so a GET does not allocate (and zero) a fresh chunk per shard per
// stripe: at 1 MiB chunks that was one allocation per MiB read and most of
// the gateway's garbage. The lists keep at most poolBytes of free buffers
// in all classes together (or a single buffer larger than that), so they
// add a fixed bound of their own rather than the garbage collector's (a
// sync.Pool keeps what was put back for a whole extra GC cycle, with 1 MiB
// buffers a large multiple of what is in use). The bound is for all
// classes, not each: with objects of mixed sizes, 16 MiB in each of the
// classes a gateway uses took it past its 256 MiB.
const (
	minPoolClass = 12 // 4 KiB: smaller buffers are cheap to allocate
	maxPoolClass = 26 // 64 MiB, the largest chunk a gateway may use
	poolBytes    = 16 << 20
)

var (
	bufPools [maxPoolClass + 1]chan []byte
	pooled   atomic.Int64 // bytes of the buffers in bufPools
)

func init() {
	for c := minPoolClass; c <= maxPoolClass; c++ {
		bufPools[c] = make(chan []byte, max(1, poolBytes>>c))
	}
}

// sizeClass is the power of two a buffer of n bytes is pooled under, or -1
// for sizes not pooled.
func sizeClass(n int64) int {
	if n <= 0 {
		return -1
	}
	c := bits.Len64(uint64(n - 1))
	if c < minPoolClass || c > maxPoolClass {
		return -1
	}
	return c
}

// getBuf returns a buffer of n bytes; its contents are undefined.
func getBuf(n int64) []byte {
	c := sizeClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	select {
	case b := <-bufPools[c]:
		pooled.Add(-int64(cap(b)))
		return b[:n]
	default:
		return make([]byte, n, 1<<c)
	}
}

// putBuf gives b back for reuse; nil and foreign sizes are ignored, and so
// are buffers past the lists' bound. The caller must not touch b
// afterwards.
func putBuf(b []byte) {
	if b == nil || cap(b) == 0 || cap(b)&(cap(b)-1) != 0 {
		return
	}
	c := bits.Len64(uint64(cap(b) - 1))
	if c < minPoolClass || c > maxPoolClass {
		return
	}
	size := int64(cap(b))
	for {
		was := pooled.Load()
		if was > 0 && was+size > poolBytes {
			return
		}
		if pooled.CompareAndSwap(was, was+size) {
			break
		}
	}
	select {
	case bufPools[c] <- b[:0]:
	default:
		pooled.Add(-size)
	}
}
