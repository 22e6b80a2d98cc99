package stripe

import (
	"context"
	"math/bits"
	"slices"
	"sync"
	"time"

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
//
// A free buffer unused for bufIdle is let go, so a gateway that stops
// writing gives its write memory back to the garbage collector.
type Buffers struct {
	max  int64         // bytes of all buffers, lent or free; at least one buffer fits
	idle time.Duration // how long a free buffer is kept unused

	mu    sync.Mutex
	used  int64                // bytes of all buffers, lent or free
	free  map[bufKey][]freeBuf // free buffers by geometry, oldest first
	nfree int64                // bytes of free buffers
	wake  chan struct{}        // closed when a buffer is returned
	timer *time.Timer          // armed while buffers are free
}

// bufIdle is how long a free write buffer is kept for the next write.
const bufIdle = 30 * time.Second

// freeBuf is a free buffer and when it came back.
type freeBuf struct {
	b  *[][]byte
	at time.Time
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
	return &Buffers{max: maxBytes, idle: bufIdle, free: map[bufKey][]freeBuf{}, wake: make(chan struct{})}
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
			b := l[len(l)-1].b
			p.unlist(key, len(l)-1, len(l))
			p.mu.Unlock()
			return b, nil
		}
		// Free buffers of other geometries give way to this one, the
		// longest unused first.
		for k, l := range p.free {
			m := 0
			for m < len(l) && p.used-int64(m)*k.bytes()+key.bytes() > p.max {
				m++
			}
			p.drop(k, m)
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
		p.free[key] = append(p.free[key], freeBuf{b, time.Now()})
		p.nfree += key.bytes()
		if p.timer == nil {
			p.timer = time.AfterFunc(p.idle, p.release)
		}
	}
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}

// unlist removes the free buffers l[i:j] of geometry k from its list,
// leaving no reference to them behind: a slice shortened in place would
// keep them reachable from its backing array, so a buffer let go would
// stay allocated, unused and out of the budget's count.
func (p *Buffers) unlist(k bufKey, i, j int) {
	if i == j {
		return
	}
	l := slices.Delete(p.free[k], i, j) // zeroes the vacated tail
	if len(l) == 0 {
		delete(p.free, k)
	} else {
		p.free[k] = l
	}
	p.nfree -= int64(j-i) * k.bytes()
}

// drop lets the n longest unused free buffers of geometry k go.
func (p *Buffers) drop(k bufKey, n int) {
	p.unlist(k, 0, n)
	p.used -= int64(n) * k.bytes()
}

// trim lets go the free buffers that came back before cutoff.
func (p *Buffers) trim(cutoff time.Time) {
	for k, l := range p.free {
		n := 0
		for n < len(l) && l[n].at.Before(cutoff) {
			n++
		}
		p.drop(k, n)
	}
}

// release runs bufIdle after a buffer came back: it lets go of the free
// buffers unused since then, and runs again while any remain.
func (p *Buffers) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.trim(now.Add(-p.idle))
	if p.nfree == 0 {
		p.timer = nil
		return
	}
	next := now
	for _, l := range p.free {
		if l[0].at.Before(next) {
			next = l[0].at
		}
	}
	p.timer.Reset(next.Add(p.idle).Sub(now))
}
