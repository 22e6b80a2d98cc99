package codec

import (
	"errors"
	"testing"
)

// TestCache: a Cache hands out one Code per name (so the code's own plan
// caches survive between calls) and fails bad names every time.
func TestCache(t *testing.T) {
	var c Cache
	for _, name := range []string{"rs-6-3", "clay-6-3"} {
		a, err := c.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Get(name)
		if err != nil || a != b {
			t.Errorf("%s: second Get gave %p (%v), want the first %p", name, b, err, a)
		}
		if a.DataShards() != 6 || a.TotalShards() != 9 {
			t.Errorf("%s: k=%d n=%d", name, a.DataShards(), a.TotalShards())
		}
	}
	for range 2 {
		if _, err := c.Get("rs-x-3"); !errors.Is(err, ErrBadName) {
			t.Errorf("bad name: %v, want ErrBadName", err)
		}
	}
}
