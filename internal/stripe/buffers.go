package stripe

import (
	"context"
	"math/bits"
	"sync"

	"github.com/regen-s3/regen/codec"
)

// Buffers lends the stripe buffers of writes out of one memory budget and
// keeps returned ones for the next write. One Buffers shared by all the
// writes of a process bounds what they hold together, however many run:
// a write that finds the budget spent waits for a buffer (its client's
// upload waits in TCP), while every buffer lent out comes back as soon as
// its stripe is sent, so waiting never deadlocks. It also spares each
// write allocating and zeroing its buffers (at 1 MiB chunks, 27 MiB per
// rs-6-3 PUT, whatever the object's size).
type Buffers struct {
	max int64 // bytes of all buffers, lent or free; at least one buffer fits

	mu    sync.Mutex
	used  int64                  // bytes of all buffers, lent or free
	free  map[bufKey][]*[][]byte // free buffers by geometry
	nfree int64                  // bytes of free buffers
	wake  chan struct{}          // closed when a buffer is returned
}

// bufKey is a buffer's geometry: n regions of chunk bytes.
type bufKey struct {
	n     int
	chunk int64
}

func (k bufKey) bytes() int64 { return int64(k.n) * codec.StripeStride(k.chunk) }

// NewBuffers returns a pool of stripe buffers of at most maxBytes in all
// (but always room for one buffer, so no write waits forever).
func NewBuffers(maxBytes int64) *Buffers {
	return &Buffers{max: maxBytes, free: map[bufKey][]*[][]byte{}, wake: make(chan struct{})}
}

// bufChunk is the region size a stripe of chunk bytes is carved from:
// chunk rounded up to a power of two (from 64 KiB), so that the stripes of
// objects of nearby sizes share buffers.
func bufChunk(chunk int64) int64 {
	if chunk <= 64<<10 {
		return 64 << 10
	}
	return 1 << bits.Len64(uint64(chunk-1))
}

// get returns n regions of at least chunk bytes each (their len is the
// allocated size; callers slice them), waiting while the budget is spent.
func (p *Buffers) get(ctx context.Context, n int, chunk int64) (*[][]byte, error) {
	key := bufKey{n, bufChunk(chunk)}
	for {
		p.mu.Lock()
		if l := p.free[key]; len(l) > 0 {
			b := l[len(l)-1]
			p.free[key] = l[:len(l)-1]
			p.nfree -= key.bytes()
			p.mu.Unlock()
			return b, nil
		}
		// Free buffers of other geometries give way to this one.
		for k, l := range p.free {
			for len(l) > 0 && p.used+key.bytes() > p.max {
				l = l[:len(l)-1]
				p.used -= k.bytes()
				p.nfree -= k.bytes()
			}
			p.free[k] = l
		}
		if p.used+key.bytes() <= p.max || p.used == 0 {
			p.used += key.bytes()
			p.mu.Unlock()
			b := codec.NewStripe(n, key.chunk)
			return &b, nil
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// put returns a buffer got from p.
func (p *Buffers) put(b *[][]byte) {
	key := bufKey{len(*b), int64(cap((*b)[0]))}
	p.mu.Lock()
	if p.used > p.max {
		// Over budget (the one buffer allowed beyond it): let it go.
		p.used -= key.bytes()
	} else {
		p.free[key] = append(p.free[key], b)
		p.nfree += key.bytes()
	}
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}
