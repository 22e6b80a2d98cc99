package gateway

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestBodyMemoryRead(t *testing.T) {
	for _, tc := range []struct {
		name        string
		body        string
		limit, hint int64
		tooLarge    bool
	}{
		{"declared size", "hello", 10, 5, false},
		{"no size", strings.Repeat("x", 100_000), 200_000, -1, false},
		{"shorter than declared", "hi", 10, 5, false},
		{"longer than declared", strings.Repeat("x", 50_000), 60_000, 10, false},
		{"at the limit", strings.Repeat("x", 64), 64, -1, false},
		{"one byte past the limit", strings.Repeat("x", 65), 64, -1, true},
		{"past the limit, declared small", strings.Repeat("x", 100_000), 64_000, 10, true},
		{"empty", "", 10, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newBodyMemory(1 << 20)
			req := &request{}
			got, err := m.read(req, iotest.OneByteReader(strings.NewReader(tc.body)), tc.limit, tc.hint)
			if tc.tooLarge {
				if !errors.Is(err, errBodyTooLarge) {
					t.Fatalf("read: %v, want errBodyTooLarge", err)
				}
			} else if err != nil || string(got) != tc.body {
				t.Fatalf("read: %d bytes, %v; want the %d bytes sent", len(got), err, len(tc.body))
			}
			if req.bodyHeld < int64(len(got)) {
				t.Fatalf("holds %d bytes for a body of %d", req.bodyHeld, len(got))
			}
			m.release(req)
			if req.bodyHeld != 0 || !m.sem.TryAcquire(1<<20) {
				t.Fatalf("after release: %d bytes still held", req.bodyHeld)
			}
		})
	}
}

// TestBodyMemoryBound: requests that hold bodies share one budget; past
// it a request waits, then gets SlowDown, and gets through once another
// request ends.
func TestBodyMemoryBound(t *testing.T) {
	m := newBodyMemory(1 << 20)
	m.wait = 50 * time.Millisecond
	holder := &request{}
	if _, err := m.read(holder, bytes.NewReader(make([]byte, 700<<10)), 2<<20, 700<<10); err != nil {
		t.Fatal(err)
	}
	other := &request{}
	_, err := m.read(other, bytes.NewReader(make([]byte, 500<<10)), 2<<20, -1)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "SlowDown" || ae.HTTPStatus != 503 {
		t.Fatalf("a body past the budget: %v, want 503 SlowDown", err)
	}
	m.release(other)

	// A request waiting for memory gets it when the holder ends.
	m.wait = 10 * time.Second
	done := make(chan error, 1)
	go func() {
		_, err := m.read(other, io.LimitReader(zeroReader{}, 500<<10), 2<<20, 500<<10)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("read while the budget is spent: %v, want a wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	m.release(holder)
	if err := <-done; err != nil {
		t.Fatalf("read after the holder ended: %v", err)
	}
	m.release(other)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }
