package stripe

import (
	"math/bits"
	"sync"
)

// Shard buffers of the read path come from pools by power-of-two size
// class, so a GET does not allocate (and zero) a fresh chunk per shard per
// stripe: at 1 MiB chunks that was one allocation per MiB read and most of
// the gateway's garbage. The pools hold what the garbage collector leaves
// them, so they add no memory bound of their own.
const (
	minPoolClass = 12 // 4 KiB: smaller buffers are cheap to allocate
	maxPoolClass = 26 // 64 MiB, the largest chunk a gateway may use
)

var bufPools [maxPoolClass + 1]sync.Pool

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
	if b, ok := bufPools[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<c)
}

// putBuf gives b back for reuse; nil and foreign sizes are ignored. The
// caller must not touch b afterwards.
func putBuf(b []byte) {
	if b == nil || cap(b) == 0 || cap(b)&(cap(b)-1) != 0 {
		return
	}
	c := bits.Len64(uint64(cap(b) - 1))
	if c < minPoolClass || c > maxPoolClass {
		return
	}
	b = b[:0]
	bufPools[c].Put(&b)
}
