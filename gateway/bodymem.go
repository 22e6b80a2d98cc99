package gateway

import (
	"context"
	"io"
	"time"

	"golang.org/x/sync/semaphore"
)

// bodyMemory bounds the request bytes all requests hold whole at once:
// XML and policy documents (wholeBody) and inline objects (readInline).
// Each is read into a buffer that grows as its bytes arrive, and every
// buffer is reserved before it is made, so a client cannot make the
// gateway hold more than Config.BodyMemory however many connections it
// opens. Without it, 400 connections that each sent all but the last
// byte of a 2 MiB PUT ?acl body held 1 GiB (issue 17); the per-request
// limits bound one request, not a thousand.
//
// A request that finds the budget spent waits up to bodyMemoryWait for
// others to finish, then gets 503 SlowDown, which SDKs retry: a flood of
// held bodies slows other whole-body requests down for at most the read
// timeout of the bodies holding it, and never grows the gateway.
type bodyMemory struct {
	sem  *semaphore.Weighted
	wait time.Duration // bodyMemoryWait; shorter in tests
}

// bodyMemoryWait is how long a request waits for body memory before it
// is answered SlowDown: long enough to ride out a burst of large
// documents (each read in well under a second on a live connection),
// short enough that a client does not wait on a flood it cannot see.
const bodyMemoryWait = 5 * time.Second

// minBodyBuf is the first buffer of a body of unknown size.
const minBodyBuf = 16 << 10

// MinBodyMemory is the smallest Config.BodyMemory: a 2 MiB XML body and
// the buffer it grows from, so the largest body always fits alone.
const MinBodyMemory = 2 * (maxRequestXML + 1)

func newBodyMemory(size int64) *bodyMemory {
	return &bodyMemory{sem: semaphore.NewWeighted(size), wait: bodyMemoryWait}
}

// take reserves n bytes for req, waiting up to m.wait.
func (m *bodyMemory) take(req *request, n int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), m.wait)
	defer cancel()
	if err := m.sem.Acquire(ctx, n); err != nil {
		return ErrSlowDown.With("The gateway is holding as many request bodies as it may; please retry.")
	}
	req.bodyHeld += n
	return nil
}

// give returns n of req's bytes.
func (m *bodyMemory) give(req *request, n int64) {
	m.sem.Release(n)
	req.bodyHeld -= n
}

// release returns everything req holds; serve calls it when the request
// ends, once nothing reads its buffers.
func (m *bodyMemory) release(req *request) {
	if req.bodyHeld > 0 {
		m.give(req, req.bodyHeld)
	}
}

// read reads r to EOF into a buffer reserved for req: at most limit
// bytes, else errBodyTooLarge. hint is the size the client declared (-1:
// none); the first buffer holds it (and one byte more, to see a longer
// body) so an honest body is read without growing. The bytes stay
// reserved until release.
func (m *bodyMemory) read(req *request, r io.Reader, limit, hint int64) ([]byte, error) {
	size := int64(minBodyBuf)
	if hint >= 0 {
		size = hint + 1
	}
	size = min(size, limit+1)
	if err := m.take(req, size); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, errBodyTooLarge
			}
			// NB: both buffers exist while one is copied: reserve the new
			// one before making it, give the old one back after.
			grown := min(2*int64(cap(buf)), limit+1)
			if err := m.take(req, grown); err != nil {
				return nil, err
			}
			nb := make([]byte, len(buf), grown)
			copy(nb, buf)
			m.give(req, int64(cap(buf)))
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(buf)) > limit {
		return nil, errBodyTooLarge
	}
	return buf, nil
}
