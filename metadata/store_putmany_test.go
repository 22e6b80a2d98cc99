package metadata

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"testing"
	"time"
)

// records returns every record of s, key to value.
func records(t *testing.T, s *Store) map[string]string {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string]string{}
	for valid := it.First(); valid; valid = it.Next() {
		out[string(it.Key())] = string(it.Value())
	}
	return out
}

// PutManifestsQueued writes what PutManifestQueued writes for each of its
// manifests in turn: the same results, errors, records (queued jobs
// included) and stats, whatever the batch holds: new keys, overwrites,
// tombstones, late and repeated versions, a key twice, invalid manifests.
func TestPutManifestsLikeOneByOne(t *testing.T) {
	ctx := context.Background()
	due := time.Unix(5000, 0)
	jobs := func(res PutResult) (*ConfirmJob, *TombstoneJob) {
		var cj *ConfirmJob
		var tj *TombstoneJob
		if res.Stored && res.Replaced != nil || res.Kept {
			cj = &ConfirmJob{Bucket: res.Current.Bucket, Key: res.Current.Key, Version: res.Current.Version, Due: due}
		}
		if res.Stored && Collectable(res.Current) {
			tj = &TombstoneJob{Bucket: res.Current.Bucket, Key: res.Current.Key, Version: res.Current.Version, Due: due}
		}
		return cj, tj
	}
	for seed := int64(1); seed <= 30; seed++ {
		batched, alone := openMem(t, nil, "n1"), openMem(t, nil, "n1")
		rng := rand.New(rand.NewSource(seed))
		var ts int64 = 100
		var written []*Manifest
		for round := range 12 {
			ms := make([]*Manifest, 1+rng.Intn(25))
			for i := range ms {
				ts++
				key := fmt.Sprintf("k%d", rng.Intn(8))
				switch op := rng.Intn(8); {
				case op <= 2:
					ms[i] = inline("b", key, ts, fmt.Sprintf("data %d", ts))
				case op == 3:
					ms[i] = tomb("b", key, ts)
				case op == 4:
					ms[i] = obj("b", key, ts, nodes3, fmt.Sprintf("p%d", ts))
				case op == 5:
					ms[i] = inline("b", key, ts-50-rng.Int63n(40), "late") // older than most
				case op == 6 && len(written) > 0:
					c := *written[rng.Intn(len(written))] // a retry
					ms[i] = &c
				default:
					ms[i] = &Manifest{Bucket: "b", Key: key} // invalid: no version
				}
			}
			copies := make([]*Manifest, len(ms))
			for i, m := range ms {
				c := *m
				copies[i] = &c
			}
			got, gotErrs := batched.PutManifestsQueued(ctx, ms, jobs)
			step := fmt.Sprintf("seed %d round %d", seed, round)
			for i, m := range copies {
				want, err := alone.PutManifestQueued(ctx, m, jobs)
				if (err == nil) != (gotErrs[i] == nil) {
					t.Fatalf("%s: manifest %d: error %v batched, %v alone", step, i, gotErrs[i], err)
				}
				if err != nil {
					continue
				}
				g := got[i]
				if g.Stored != want.Stored || g.Held != want.Held || g.Kept != want.Kept || g.Previous != want.Previous ||
					len(g.Dropped) != len(want.Dropped) || (g.Current == nil) != (want.Current == nil) ||
					g.Current != nil && g.Current.Version != want.Current.Version {
					t.Fatalf("%s: manifest %d (%s@%d): result %+v batched, %+v alone", step, i, m.Key, m.Version.TS, g, want)
				}
				written = append(written, m)
			}
			if a, b := records(t, batched), records(t, alone); !maps.Equal(a, b) {
				t.Fatalf("%s: %d records batched, %d alone, or different values", step, len(a), len(b))
			}
			sa, err1 := batched.Stats(ctx)
			sb, err2 := alone.Stats(ctx)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(sa) != fmt.Sprint(sb) {
				t.Fatalf("%s: stats %+v batched, %+v alone", step, sa, sb)
			}
		}
	}
}
