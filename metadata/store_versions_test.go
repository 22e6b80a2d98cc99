package metadata

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// renderVersions prints a key's state as "cur | prev prev ...", versions by
// TS, tombstones suffixed "~"; "-" when the key is absent.
func renderVersions(t *testing.T, s *Store, bucket, key string) string {
	t.Helper()
	cur, prev, err := s.Versions(context.Background(), bucket, key)
	if errors.Is(err, ErrNotFound) {
		return "-"
	}
	if err != nil {
		t.Fatal(err)
	}
	name := func(m *Manifest) string {
		if m.Deleted {
			return fmt.Sprintf("%d~", m.Version.TS)
		}
		return fmt.Sprint(m.Version.TS)
	}
	out := []string{name(cur), "|"}
	for _, p := range prev {
		out = append(out, name(p))
	}
	return strings.Join(out, " ")
}

func TestPreviousVersions(t *testing.T) {
	// Steps: "put N" puts an object with part pN, "del N" a tombstone,
	// "drop N" DropPrevious(upTo N), "rollback N" RollBack(failed N).
	cases := []struct {
		name  string
		steps []string
		want  string
		owned []string // parts still indexed (all others of p1..p9 are not)
	}{
		{"first write", []string{"put 1"}, "1 |", []string{"p1"}},
		{"newer replaces, replaced kept", []string{"put 1", "put 2"}, "2 | 1", []string{"p1", "p2"}},
		{"older arrives, kept as previous", []string{"put 2", "put 1"}, "2 | 1", []string{"p1", "p2"}},
		{"retry of a previous is a no-op", []string{"put 1", "put 2", "put 1"}, "2 | 1", []string{"p1", "p2"}},
		{"tombstone replaces, object kept", []string{"put 1", "del 2"}, "2~ | 1", []string{"p1"}},
		// Past MaxPrevious nothing is pushed out: the oldest may be the
		// acknowledged version, the newer ones failed overwrites.
		{"past MaxPrevious the oldest stays", []string{"put 1", "put 2", "put 3", "put 4", "put 5", "put 6"}, "6 | 5 4 3 2 1", []string{"p1", "p2", "p3", "p4", "p5", "p6"}},
		{"past MaxPrevious an older arrival is kept", []string{"put 2", "put 3", "put 4", "put 5", "put 6", "put 1"}, "6 | 5 4 3 2 1", []string{"p1", "p2", "p3", "p4", "p5", "p6"}},
		{"drop older than", []string{"put 1", "put 2", "put 3", "drop 2"}, "3 | 2", []string{"p2", "p3"}},
		{"drop all", []string{"put 1", "put 2", "put 3", "drop 3"}, "3 |", []string{"p3"}},
		{"rollback to newest previous", []string{"put 1", "put 2", "put 3", "rollback 3"}, "2 | 1", []string{"p1", "p2"}},
		{"rollback of a tombstone", []string{"put 1", "del 2", "rollback 2"}, "1 |", []string{"p1"}},
		{"rollback without previous removes the key", []string{"put 1", "rollback 1"}, "-", nil},
		{"rollback of a non-current version is a no-op", []string{"put 1", "put 2", "rollback 1"}, "2 | 1", []string{"p1", "p2"}},
		{"rolled-back version may come again", []string{"put 1", "put 2", "rollback 2", "put 2"}, "2 | 1", []string{"p1", "p2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := openMem(t, nil, "n1")
			for _, step := range tc.steps {
				var op string
				var ts int64
				fmt.Sscanf(step, "%s %d", &op, &ts)
				var err error
				switch op {
				case "put":
					_, err = s.PutManifest(ctx, obj("b", "k", ts, nodes3, fmt.Sprintf("p%d", ts)))
				case "del":
					_, err = s.PutManifest(ctx, tomb("b", "k", ts))
				case "drop":
					_, err = s.DropPrevious(ctx, "b", "k", ver(ts), nil)
				case "rollback":
					_, err = s.RollBack(ctx, "b", "k", ver(ts))
				}
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
			}
			if got := renderVersions(t, s, "b", "k"); got != tc.want {
				t.Fatalf("versions %q, want %q", got, tc.want)
			}
			var owned []string
			for i := 1; i <= 9; i++ {
				id := fmt.Sprintf("p%d", i)
				if refs, _ := s.PartOwners(ctx, id); len(refs) > 0 {
					owned = append(owned, id)
				}
			}
			if !slices.Equal(owned, tc.owned) {
				t.Fatalf("indexed parts %v, want %v", owned, tc.owned)
			}
		})
	}
}

func TestPutResultReportsKeptAndDropped(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	for ts := int64(2); ts <= 6; ts++ {
		res, err := s.PutManifest(ctx, obj("b", "k", ts, nodes3, fmt.Sprint("p", ts)))
		if err != nil || res.Dropped != nil || res.Previous != int(ts-2) {
			t.Fatalf("write %d: %+v %v", ts, res, err)
		}
	}
	// 6 current, 5 4 3 2 previous: MaxPrevious reached (the caller
	// confirms at once), nothing pushed out.
	const top = MaxPreviousKept + 2
	for ts := int64(7); ts <= top; ts++ {
		res, err := s.PutManifest(ctx, obj("b", "k", ts, nodes3, fmt.Sprint("p", ts)))
		if err != nil || res.Dropped != nil {
			t.Fatalf("write %d: %+v %v", ts, res, err)
		}
	}
	// top current, top-1 .. 2 previous (MaxPreviousKept of them): the next
	// write pushes out 3, the oldest (2) stays.
	res, err := s.PutManifest(ctx, obj("b", "k", top+1, nodes3, "pn"))
	if err != nil || !res.Stored || res.Replaced.Version != ver(top) || len(res.Dropped) != 1 || res.Dropped[0].Version != ver(3) || res.Previous != MaxPreviousKept {
		t.Fatalf("newer write past the bound: %+v %v", res, err)
	}
	_, prev, err := s.Versions(ctx, "b", "k")
	if err != nil || len(prev) != MaxPreviousKept || prev[len(prev)-1].Version != ver(2) {
		t.Fatalf("previous versions after the bound: %d, oldest %v, %v", len(prev), prev[len(prev)-1].Version, err)
	}
	res, err = s.PutManifest(ctx, obj("b", "k", 5, nodes3, "p5"))
	if err != nil || res.Stored || res.Kept || res.Dropped != nil || res.Current.Version != ver(top+1) {
		t.Fatalf("held version: %+v %v", res, err)
	}
	if _, err := s.DropPrevious(ctx, "b", "k", ver(top+1), nil); err != nil {
		t.Fatal(err)
	}
	res, err = s.PutManifest(ctx, obj("b", "k", 1, nodes3, "p1"))
	if err != nil || res.Stored || !res.Kept || res.Dropped != nil || res.Previous != 1 {
		t.Fatalf("older, room left: %+v %v", res, err)
	}
}

// Failed overwrites, however many within MaxPreviousKept, never push out
// the acknowledged version they replaced.
func TestFailedOverwritesKeepAcknowledged(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	if _, err := s.PutManifest(ctx, obj("b", "k", 1, nodes3, "acked")); err != nil {
		t.Fatal(err)
	}
	for ts := int64(2); ts <= 2+MaxPrevious*3; ts++ {
		if _, err := s.PutManifest(ctx, obj("b", "k", ts, nodes3, fmt.Sprint("failed", ts))); err != nil {
			t.Fatal(err)
		}
	}
	_, prev, err := s.Versions(ctx, "b", "k")
	if err != nil || prev[len(prev)-1].Version != ver(1) {
		t.Fatalf("the acknowledged version is gone from the previous versions: %v", err)
	}
	if refs, _ := s.PartOwners(ctx, "acked"); len(refs) == 0 {
		t.Fatal("the acknowledged version's part is no longer indexed (its shards would be collected)")
	}
}

func TestRollBackRestoresInlineAndStats(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutManifest(ctx, inline("b", "k", 1, "tiny")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutManifest(ctx, obj("b", "k", 2, []string{"n1", "n2"}, "p2")); err != nil {
		t.Fatal(err)
	}
	failed, err := s.RollBack(ctx, "b", "k", ver(2))
	if err != nil || failed == nil || failed.Parts[0].ID != "p2" {
		t.Fatalf("RollBack = %+v, %v", failed, err)
	}
	got, err := s.GetManifest(ctx, "b", "k")
	if err != nil || string(got.Inline) != "tiny" || got.Version != ver(1) {
		t.Fatalf("after rollback: %+v %v", got, err)
	}
	st, _ := s.Stats(ctx)
	if st != (Stats{Objects: 1, Bytes: 4}) {
		t.Fatalf("stats %+v", st)
	}
	s.Close()
	s = openMem(t, fs, "n1")
	if st2, _ := s.Stats(ctx); st2 != st {
		t.Fatalf("rescanned stats %+v, want %+v", st2, st)
	}
}

func TestPreviousVersionsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Manifest{inline("b", "k", 1, "one"), obj("b", "k", 2, nodes3, "p2")} {
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = openMem(t, fs, "n1")
	_, prev, err := s.Versions(ctx, "b", "k")
	if err != nil || len(prev) != 1 || string(prev[0].Inline) != "one" {
		t.Fatalf("previous after reopen: %+v %v", prev, err)
	}
}

func TestListCarriesPrevious(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "")
	for _, m := range []*Manifest{
		obj("b", "a", 1, nodes3, "pa"),
		obj("b", "k", 1, nodes3, "p1"),
		obj("b", "k", 2, nodes3, "p2"),
		tomb("b", "k", 3),
		obj("b", "z", 1, nodes3, "pz"),
	} {
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	es, _, err := s.List(ctx, ListQuery{Bucket: "b"})
	if err != nil || len(es) != 3 {
		t.Fatalf("List = %+v, %v", es, err)
	}
	if es[0].Previous != nil || es[2].Previous != nil {
		t.Fatalf("keys without previous versions list some: %+v", es)
	}
	k := es[1]
	if !k.Deleted || len(k.Previous) != 2 || k.Previous[0].Version != ver(2) || k.Previous[1].Version != ver(1) ||
		k.Previous[0].ETag != "etag-2" || k.Previous[0].Code != "rs-2-1" || k.Previous[0].Size != 100 || k.Previous[0].Deleted {
		t.Fatalf("entry of k: %+v", k)
	}
	if _, err := s.DropPrevious(ctx, "b", "k", ver(3), nil); err != nil {
		t.Fatal(err)
	}
	es, _, _ = s.List(ctx, ListQuery{Bucket: "b", Prefix: "k"})
	if len(es) != 1 || es[0].Previous != nil {
		t.Fatalf("after DropPrevious: %+v", es)
	}
}

func TestConfirmQueue(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "")
	t0 := time.Unix(1000, 0)
	jobs := []ConfirmJob{
		{Bucket: "b", Key: "late", Version: ver(1), Since: t0, Due: t0.Add(time.Hour)},
		{Bucket: "b", Key: "k\x00x", Version: ver(2), Since: t0, Due: t0.Add(time.Minute)},
		{Bucket: "b", Key: "k", Version: ver(3), Since: t0, Due: t0.Add(time.Minute)},
	}
	for _, j := range jobs {
		if err := s.EnqueueConfirm(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	due, err := s.DueConfirms(ctx, t0.Add(time.Minute), 10)
	if err != nil || len(due) != 2 || due[0].Key != "k" || due[1].Key != "k\x00x" || !due[0].Since.Equal(t0) {
		t.Fatalf("DueConfirms = %+v, %v", due, err)
	}
	if err := s.DoneConfirm(ctx, due...); err != nil {
		t.Fatal(err)
	}
	due, _ = s.DueConfirms(ctx, t0.Add(2*time.Hour), 10)
	if len(due) != 1 || due[0].Key != "late" {
		t.Fatalf("after DoneConfirm: %+v", due)
	}
}

// TestDropPreviousMany: one call drops the replaced versions of every key
// whose Decide says so, and only theirs; a key named twice is decided by
// its first request; a key the store lacks is passed over; the stats and
// the previous-version flags follow.
func TestDropPreviousMany(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	for _, key := range []string{"a", "b", "c"} {
		for ts := int64(10); ts <= 30; ts += 10 {
			if _, err := s.PutManifest(ctx, obj("bk", key, ts, nodes3, fmt.Sprintf("%s%d", key, ts))); err != nil {
				t.Fatal(err)
			}
		}
	}
	upTo := func(ts int64) func(*Manifest, []*Manifest) (Version, func(*Manifest) bool, bool) {
		return func(cur *Manifest, prev []*Manifest) (Version, func(*Manifest) bool, bool) {
			return Version{TS: ts, Writer: cur.Version.Writer}, nil, true
		}
	}
	declined := 0
	decline := func(*Manifest, []*Manifest) (Version, func(*Manifest) bool, bool) {
		declined++
		return Version{}, nil, false
	}
	reqs := []DropRequest{
		{Bucket: "bk", Key: "a", Decide: upTo(30)}, // both previous versions go
		{Bucket: "bk", Key: "b", Decide: upTo(20)}, // the one 20 replaced
		{Bucket: "bk", Key: "c", Decide: decline},
		{Bucket: "bk", Key: "a", Decide: decline}, // a second request of a: not asked
		{Bucket: "bk", Key: "none", Decide: decline},
	}
	dropped, err := s.DropPreviousManyNoSync(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if declined != 1 {
		t.Errorf("Decide declined %d times, want once (c alone)", declined)
	}
	tss := func(ms []*Manifest) (out []int64) {
		for _, m := range ms {
			out = append(out, m.Version.TS)
		}
		return out
	}
	for i, want := range [][]int64{{20, 10}, {10}, nil, nil, nil} {
		if got := tss(dropped[i]); !slices.Equal(got, want) {
			t.Errorf("request %d (%s) dropped %v, want %v", i, reqs[i].Key, got, want)
		}
	}
	for key, want := range map[string][]int64{"a": nil, "b": {20}, "c": {20, 10}} {
		_, prev, err := s.Versions(ctx, "bk", key)
		if err != nil {
			t.Fatal(err)
		}
		if got := tss(prev); !slices.Equal(got, want) {
			t.Errorf("%s keeps %v, want %v", key, got, want)
		}
	}
}
