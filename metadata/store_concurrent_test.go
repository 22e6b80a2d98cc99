package metadata

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestConcurrentWritersConverge has several writers race random versions
// of a few keys. Invariants: each key ends at its newest version, the part
// index names exactly the current parts, and the in-memory stats equal a
// fresh scan after reopening.
func TestConcurrentWritersConverge(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	const writers, perWriter, keys = 8, 40, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for i := range perWriter {
				key := fmt.Sprintf("k%d", rng.IntN(keys))
				ts := int64(rng.IntN(1000) + 1)
				var m *Manifest
				if rng.IntN(5) == 0 {
					m = tomb("b", key, ts)
				} else {
					m = obj("b", key, ts, nodes3, fmt.Sprintf("w%d-%d", w, i))
				}
				m.Version.Writer = fmt.Sprintf("w%d", w)
				if _, err := s.PutManifest(ctx, m); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()

	// Replay the same writes sequentially to learn the expected winners.
	want := map[string]*Manifest{}
	for w := range writers {
		rng := rand.New(rand.NewPCG(uint64(w), 99))
		for i := range perWriter {
			key := fmt.Sprintf("k%d", rng.IntN(keys))
			ts := int64(rng.IntN(1000) + 1)
			var m *Manifest
			if rng.IntN(5) == 0 {
				m = tomb("b", key, ts)
			} else {
				m = obj("b", key, ts, nodes3, fmt.Sprintf("w%d-%d", w, i))
			}
			m.Version.Writer = fmt.Sprintf("w%d", w)
			if m.Newer(want[key]) {
				want[key] = m
			}
		}
	}
	for key, w := range want {
		got, err := s.GetManifest(ctx, "b", key)
		if err != nil || got.Version != w.Version {
			t.Fatalf("%s: got %+v %v, want version %v", key, got, err, w.Version)
		}
		for _, p := range w.Parts {
			refs, _ := s.PartOwners(ctx, p.ID)
			if !slices.Equal(refs, []ObjectRef{{"b", key}}) {
				t.Fatalf("part %s of current %s: owners %v", p.ID, key, refs)
			}
		}
	}
	live, _ := s.Stats(ctx)
	s.Close()
	s = openMem(t, fs, "n2")
	scanned, _ := s.Stats(ctx)
	if live != scanned {
		t.Fatalf("in-memory stats %+v, rescanned %+v", live, scanned)
	}
}

func TestCancelledContext(t *testing.T) {
	s := openMem(t, nil, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.PutManifest(ctx, obj("b", "k", 1, nodes3, "p")); err == nil {
		t.Fatal("PutManifest ignored a cancelled context")
	}
	if _, _, err := s.List(ctx, ListQuery{Bucket: "b"}); err == nil {
		t.Fatal("List ignored a cancelled context")
	}
	if _, err := s.GetManifest(context.Background(), "b", "k"); err == nil {
		t.Fatal("a write with a cancelled context was stored")
	}
}
