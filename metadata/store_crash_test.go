package metadata

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A manifest write answered is durable: a crash at any moment (a clone of
// the file system holding only what was synced) keeps every write
// answered before it, batched or alone, while other writers keep the
// store's key locks busy. The writes release their key locks before the
// log's sync (commitUnlocking); this fails when the sync is left out.
func TestAnsweredWritesSurviveACrash(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	s := openMem(t, fs, "n1")
	var mu sync.Mutex
	acked := map[string]int64{} // key -> newest version answered
	ack := func(m *Manifest) {
		mu.Lock()
		acked[m.Key] = max(acked[m.Key], m.Version.TS)
		mu.Unlock()
	}
	const writers, rounds = 4, 40
	var crashes []*vfs.MemFS
	var snaps []map[string]int64
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for r := range rounds {
				ts := int64(1000 + r)
				if g%2 == 0 {
					ms := make([]*Manifest, 20)
					for i := range ms {
						ms[i] = inline("b", fmt.Sprintf("g%d-k%d", g, i), ts, fmt.Sprintf("v%d", ts))
					}
					_, errs := s.PutManifestsQueued(ctx, ms, nil)
					for i, err := range errs {
						if err != nil {
							t.Errorf("batch write %s: %v", ms[i].Key, err)
							continue
						}
						ack(ms[i])
					}
					continue
				}
				m := inline("b", fmt.Sprintf("g%d-k%d", g, r%5), ts, fmt.Sprintf("v%d", ts))
				if _, err := s.PutManifestQueued(ctx, m, nil); err != nil {
					t.Errorf("write %s: %v", m.Key, err)
					continue
				}
				ack(m)
			}
		})
	}
	wg.Go(func() {
		for range 8 {
			time.Sleep(3 * time.Millisecond)
			mu.Lock()
			snap := make(map[string]int64, len(acked))
			for k, v := range acked {
				snap[k] = v
			}
			mu.Unlock()
			// NB: after the snapshot: every write in it was answered
			// before the crash.
			crashes = append(crashes, fs.CrashClone(vfs.CrashCloneCfg{}))
			snaps = append(snaps, snap)
		}
	})
	wg.Wait()
	checked := 0
	for i, c := range crashes {
		r, err := Open("db", Options{FS: c, NodeID: "n1"})
		if err != nil {
			t.Fatalf("crash %d: open: %v", i, err)
		}
		for k, ts := range snaps[i] {
			m, err := r.GetManifest(ctx, "b", k)
			switch {
			case err != nil:
				t.Errorf("crash %d: %s answered at version %d, then lost: %v", i, k, ts, err)
			case m.Version.TS < ts:
				t.Errorf("crash %d: %s answered at version %d, found %d after the crash", i, k, ts, m.Version.TS)
			}
			checked++
		}
		r.Close()
	}
	if checked == 0 {
		t.Fatal("no write was answered before any crash: the test checked nothing")
	}
}
