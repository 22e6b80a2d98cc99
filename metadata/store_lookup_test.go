package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// TestLookup: a reader's lookup answers as Versions does, leaves inline
// data out unless asked, and reads previous versions only when the key
// has some.
func TestLookup(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	if _, err := s.Lookup(ctx, "b", "k", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent key: %v, want ErrNotFound", err)
	}
	if _, err := s.PutManifest(ctx, inline("b", "k", 1, "one")); err != nil {
		t.Fatal(err)
	}
	lk, err := s.Lookup(ctx, "b", "k", true)
	if err != nil || string(lk.Current.Inline) != "one" || lk.Previous != nil {
		t.Fatalf("Lookup(inline) = %+v, %v", lk, err)
	}
	if lk, err = s.Lookup(ctx, "b", "k", false); err != nil || lk.Current.Inline != nil || lk.Current.Size != 3 {
		t.Fatalf("Lookup(no inline) = %+v, %v", lk, err)
	}
	if _, err := s.PutManifest(ctx, inline("b", "k", 2, "two")); err != nil {
		t.Fatal(err)
	}
	lk, err = s.Lookup(ctx, "b", "k", true)
	if err != nil || lk.Current.Version != ver(2) || len(lk.Previous) != 1 || lk.Previous[0].Version != ver(1) {
		t.Fatalf("after an overwrite: %+v, %v", lk, err)
	}
}

// TestOldCommittedFlag: a record written when servers still marked
// versions committed (flagCommitted) reads as before, and the next write
// of the record drops the retired bit.
func TestOldCommittedFlag(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	if _, err := s.PutManifest(ctx, inline("b", "k", 1, "one")); err != nil {
		t.Fatal(err)
	}
	mk := manifestKey("b", "k")
	val, err := s.get(mk)
	if err != nil {
		t.Fatal(err)
	}
	val[1] |= flagCommitted // as MarkCommitted wrote it
	if err := s.db.Set(mk, val, nil); err != nil {
		t.Fatal(err)
	}
	if lk, err := s.Lookup(ctx, "b", "k", true); err != nil || lk.Current.Version != ver(1) || string(lk.Current.Inline) != "one" {
		t.Fatalf("Lookup of a marked record = %+v, %v", lk, err)
	}
	if raw, err := s.LookupRaw(ctx, "b", "k", true); err != nil || string(raw.Current.Inline) != "one" {
		t.Fatalf("LookupRaw of a marked record = %+v, %v", raw, err)
	}
	if cur, prev, err := s.CurrentIs(ctx, "b", "k", ver(1)); !cur || prev || err != nil {
		t.Fatalf("CurrentIs of a marked record = %v, %v, %v", cur, prev, err)
	}
	if _, err := s.PutManifest(ctx, inline("b", "k", 2, "two")); err != nil {
		t.Fatal(err)
	}
	if val, err = s.get(mk); err != nil || val[1]&flagCommitted != 0 {
		t.Fatalf("after an overwrite: flags %#x, %v; want the retired flag dropped", val[1], err)
	}
}

// TestCurrentIs: CurrentIs answers whether the named version is current
// here and whether the key has previous versions.
func TestCurrentIs(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	for _, tc := range []struct {
		step              string
		put               int64 // 0: no write before the question
		key               string
		ask               int64
		wantCur, wantPrev bool
	}{
		{"an absent key", 0, "absent", 1, false, false},
		{"a fresh key, its version", 2, "k", 2, true, false},
		{"a fresh key, another version", 0, "k", 1, false, false},
		{"an overwrite, its version", 3, "k", 3, true, true},
		{"an overwrite, the replaced version", 0, "k", 2, false, false},
	} {
		if tc.put != 0 {
			if _, err := s.PutManifest(ctx, obj("b", tc.key, tc.put, nodes3, fmt.Sprint("p", tc.put))); err != nil {
				t.Fatal(err)
			}
		}
		cur, prev, err := s.CurrentIs(ctx, "b", tc.key, ver(tc.ask))
		if err != nil || cur != tc.wantCur || prev != tc.wantPrev {
			t.Errorf("%s: CurrentIs = %v, %v, %v; want %v, %v", tc.step, cur, prev, err, tc.wantCur, tc.wantPrev)
		}
	}
}

// TestPutManifestQueued: the jobs a write's result calls for are queued
// with it (and counted), and none for a write that changes nothing.
func TestPutManifestQueued(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	t0 := time.Unix(1000, 0)
	var results []PutResult
	jobs := func(res PutResult) (*ConfirmJob, *TombstoneJob) {
		results = append(results, res)
		var cj *ConfirmJob
		if res.Replaced != nil || res.Kept {
			cj = &ConfirmJob{Bucket: "b", Key: "k", Version: res.Current.Version, Since: t0, Due: t0}
		}
		var tj *TombstoneJob
		if res.Stored && Collectable(res.Current) {
			tj = &TombstoneJob{Bucket: "b", Key: "k", Version: res.Current.Version, Due: t0}
		}
		return cj, tj
	}
	for _, m := range []*Manifest{obj("b", "k", 1, nodes3, "p1"), tomb("b", "k", 2)} {
		if _, err := s.PutManifestQueued(ctx, m, jobs); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := s.PutManifestQueued(ctx, tomb("b", "k", 2), jobs); err != nil || res.Stored || len(results) != 2 {
		t.Fatalf("a retry: %+v, %v, %d results asked for jobs; want no write", res, err, len(results))
	}
	due, err := s.DueConfirms(ctx, t0, 10)
	if err != nil || len(due) != 1 || due[0].Version != ver(2) {
		t.Fatalf("confirm jobs %+v, %v; want the one of the tombstone that replaced a version", due, err)
	}
	tj, err := s.DueTombstones(ctx, t0, 10)
	if err != nil || len(tj) != 1 || tj[0].Version != ver(2) {
		t.Fatalf("tombstone jobs %+v, %v", tj, err)
	}
	if st, _ := s.Stats(ctx); st.TombstoneJobs != 1 {
		t.Fatalf("%d tombstone jobs counted, want 1", st.TombstoneJobs)
	}
}

// TestLookupRaw: the undecoded lookup decodes to what Lookup returns,
// inline data apart, and says the same of absent keys.
func TestLookupRaw(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	if _, err := s.LookupRaw(ctx, "b", "k", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent key: %v, want ErrNotFound", err)
	}
	for ts, data := range []string{"one", "two"} {
		if _, err := s.PutManifest(ctx, inline("b", "k", int64(ts+1), data)); err != nil {
			t.Fatal(err)
		}
		for _, withData := range []bool{true, false} {
			raw, err := s.LookupRaw(ctx, "b", "k", withData)
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.Lookup(ctx, "b", "k", withData)
			if err != nil {
				t.Fatal(err)
			}
			if !withData {
				for _, p := range want.Previous {
					p.Inline = nil // as the shard server leaves it out
				}
			}
			// NB: where the store keeps the data is not part of a reply.
			want.Current.home = homeNone
			for _, p := range want.Previous {
				p.home = homeNone
			}
			decode := func(r RawManifest) *Manifest {
				t.Helper()
				var noData Manifest
				if err := json.Unmarshal(r.JSON, &noData); err != nil || noData.Inline != nil {
					t.Fatalf("raw manifest %s: %v, or inline data in its JSON", r.JSON, err)
				}
				m, err := r.Decode()
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			got := Lookup{Current: decode(raw.Current)}
			for _, p := range raw.Previous {
				got.Previous = append(got.Previous, decode(p))
			}
			if !reflect.DeepEqual(got, want) || len(want.Previous) != ts {
				t.Fatalf("write %d, inline %v: LookupRaw decodes to\n%+v\nLookup\n%+v", ts+1, withData, got, want)
			}
		}
	}
}
