package metadata

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// TestSingleDeletesKeepTheirRecordsGone: previous records and confirm jobs
// are removed by single deletes, which are right only while each of their
// keys is set once between deletes. Two stores get the same seeded random
// writes (new versions, late versions, retries, tombstones), drops of
// previous versions, rollbacks and confirm jobs queued and done; one is
// flushed and compacted at random points (where a single delete meets its
// set, and a second set would come back), the other never. Their records
// must stay the same and pebble must report no misuse.
func TestSingleDeletesKeepTheirRecordsGone(t *testing.T) {
	ctx := context.Background()
	compact := func(t *testing.T, s *Store) {
		t.Helper()
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, false); err != nil {
			t.Fatal(err)
		}
	}
	for seed := int64(1); seed <= 20; seed++ {
		compacted, plain := openMem(t, nil, "n1"), openMem(t, nil, "n1")
		rng := rand.New(rand.NewSource(seed))
		var ts int64 = 1000
		var written []*Manifest
		var queued []ConfirmJob
		both := func(f func(s *Store) error) {
			t.Helper()
			e1, e2 := f(compacted), f(plain)
			if (e1 == nil) != (e2 == nil) {
				t.Fatalf("seed %d: %v on the compacted store, %v on the other", seed, e1, e2)
			}
		}
		for step := range 400 {
			ts++
			key := fmt.Sprintf("k%d", rng.Intn(6))
			switch op := rng.Intn(10); {
			case op <= 2:
				m := inline("b", key, ts, fmt.Sprintf("data %d", ts))
				written = append(written, m)
				both(func(s *Store) error { c := *m; _, err := s.PutManifest(ctx, &c); return err })
			case op == 3:
				m := inline("b", key, ts-100-rng.Int63n(200), "late")
				both(func(s *Store) error { c := *m; _, err := s.PutManifest(ctx, &c); return err })
			case op == 4 && len(written) > 0:
				m := written[rng.Intn(len(written))] // a retry of a version held or dropped
				both(func(s *Store) error { c := *m; _, err := s.PutManifest(ctx, &c); return err })
			case op == 5:
				m := tomb("b", key, ts)
				both(func(s *Store) error { c := *m; _, err := s.PutManifest(ctx, &c); return err })
			case op == 6:
				cur, _, err := plain.Versions(ctx, "b", key)
				if err == nil && cur != nil {
					both(func(s *Store) error { _, err := s.DropPrevious(ctx, "b", key, cur.Version, nil); return err })
				}
			case op == 7:
				cur, _, err := plain.Versions(ctx, "b", key)
				if err == nil && cur != nil {
					both(func(s *Store) error { _, err := s.RollBack(ctx, "b", key, cur.Version); return err })
				}
			case op == 8:
				j := ConfirmJob{Bucket: "b", Key: key, Version: ver(ts), Due: time.Unix(0, ts)}
				queued = append(queued, j)
				both(func(s *Store) error { return s.EnqueueConfirm(ctx, j) })
			case len(queued) > 0:
				i := rng.Intn(len(queued))
				j := queued[i]
				queued = slices.Delete(queued, i, i+1)
				if rng.Intn(2) == 0 {
					both(func(s *Store) error { return s.DoneConfirm(ctx, j) })
				} else {
					next := j
					next.Due = next.Due.Add(time.Duration(1 + rng.Intn(3)))
					queued = append(queued, next)
					both(func(s *Store) error { return s.DoneConfirms(ctx, []ConfirmJob{j}, []ConfirmJob{next}) })
				}
			}
			if rng.Intn(15) == 0 {
				compact(t, compacted)
			}
			if step%50 == 49 {
				if a, b := records(t, compacted), records(t, plain); !maps.Equal(a, b) {
					t.Fatalf("seed %d step %d: the compacted store's records differ from the other's (%d against %d)", seed, step, len(a), len(b))
				}
			}
		}
		compact(t, compacted)
		if a, b := records(t, compacted), records(t, plain); !maps.Equal(a, b) {
			t.Fatalf("seed %d at the end: the compacted store's records differ from the other's (%d against %d)", seed, len(a), len(b))
		}
		if n := compacted.EngineStats().SingleDeleteMisuse; n != 0 {
			t.Fatalf("seed %d: pebble reported %d single deletes misused", seed, n)
		}
	}
}
