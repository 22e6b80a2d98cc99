package metadata

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestEachManifest walks a store of more than two pages of records in
// three buckets, with tombstones, overwritten keys and inline objects:
// every live key is visited once, in order, with its current version and
// without inline data, and fn's error stops the walk.
func TestEachManifest(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	var want []string
	put := func(m *Manifest) {
		t.Helper()
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"alpha", "beta", "gamma"} {
		for i := range 900 {
			key := fmt.Sprintf("k%04d", i)
			switch i % 5 {
			case 0: // deleted
				put(obj(b, key, 1, nodes3, fmt.Sprintf("%s-%d", b, i)))
				put(tomb(b, key, 2))
				continue
			case 1: // inline
				put(inline(b, key, 1, "small"))
			case 2: // overwritten: the walk must see version 3
				put(obj(b, key, 1, nodes3, fmt.Sprintf("%s-%d-old", b, i)))
				put(obj(b, key, 3, nodes3, fmt.Sprintf("%s-%d", b, i)))
			default:
				put(obj(b, key, 1, nodes3, fmt.Sprintf("%s-%d", b, i)))
			}
			want = append(want, b+"/"+key)
		}
	}
	if len(want) <= 2*eachPage {
		t.Fatalf("test needs more than two pages, has %d live keys", len(want))
	}

	var got []string
	err := s.EachManifest(ctx, func(m *Manifest) error {
		got = append(got, m.Bucket+"/"+m.Key)
		if m.Deleted {
			t.Errorf("%s/%s: tombstone visited", m.Bucket, m.Key)
		}
		if m.Inline != nil {
			t.Errorf("%s/%s: inline data read", m.Bucket, m.Key)
		}
		var i int
		fmt.Sscanf(m.Key, "k%04d", &i)
		if i%5 == 2 && m.Version != ver(3) {
			t.Errorf("%s/%s: version %v, want the current one", m.Bucket, m.Key, m.Version)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walk visited %d keys, want %d (first difference near %d)", len(got), len(want), firstDiff(got, want))
	}

	stop := errors.New("stop")
	n := 0
	err = s.EachManifest(ctx, func(*Manifest) error {
		if n++; n == eachPage+5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != eachPage+5 {
		t.Fatalf("walk after fn failed: err %v after %d calls, want %v after %d", err, n, stop, eachPage+5)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.EachManifest(cctx, func(*Manifest) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("walk with a cancelled context: %v", err)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
