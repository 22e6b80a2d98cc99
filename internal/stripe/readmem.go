package stripe

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// ReadMemory bounds the shard buffers of every read that shares it
// (ReadParams.Memory). A read takes a stripe's worth before fetching the
// stripe and gives it back once the stripe is written to its client, so
// clients that stop reading hold at most the budget between them: 100 GETs
// of a 24 MiB object whose clients read nothing each held up to three
// stripes (18 MiB at rs-6-3, 1 MiB chunks) until their write timeout, and
// took a gateway to 1 GiB. A read that finds the budget spent waits, as
// writes wait for stripe buffers (Buffers).
//
// A stripe costs k times its column range (the bytes a decode needs; a
// healthy ranged read needs fewer). Hedged fetches of a slow stripe may
// exceed it by up to n-k columns for as long as they run.
//
// Stripes of one read are taken in order, each after its place in the
// read-ahead queue: memory is never held for a stripe the writer reaches
// only after one still waiting for memory, so reads sharing a budget do
// not deadlock; a stripe held by a client that stops reading is freed by
// its connection's write timeout.
type ReadMemory struct {
	sem  *semaphore.Weighted
	size int64
}

// NewReadMemory returns a budget of bytes for reads (a stripe larger than
// it is read alone).
func NewReadMemory(bytes int64) *ReadMemory {
	return &ReadMemory{sem: semaphore.NewWeighted(bytes), size: bytes}
}

// take reserves n bytes, waiting while they are not free, and returns the
// func that gives them back. A nil ReadMemory bounds nothing.
func (m *ReadMemory) take(ctx context.Context, n int64) (func(), error) {
	if m == nil {
		return func() {}, nil
	}
	n = min(n, m.size)
	if err := m.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { m.sem.Release(n) }, nil
}
