package metadata

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// A write that keeps a small object's data (a repair switch: same data,
// new version and placement) leaves the data where it was, through the
// confirmation that drops the old version and a rollback of the switch;
// a write with new data replaces it.
func TestInlineDataKeptAcrossSwitches(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	get := func(want string) {
		t.Helper()
		m, err := s.GetManifest(ctx, "b", "k")
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Inline) != want {
			t.Fatalf("inline data %q, want %q", m.Inline, want)
		}
	}
	put := func(m *Manifest) {
		t.Helper()
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	v1 := inline("b", "k", 1, "first")
	v1.Placement = []string{"n1", "n2", "n3"}
	put(v1)
	sw := inline("b", "k", 2, "first")
	sw.Placement = []string{"n1", "n2", "n4"}
	put(sw)
	get("first")
	if _, err := s.RollBack(ctx, "b", "k", sw.Version); err != nil {
		t.Fatal(err)
	}
	get("first")
	put(sw)
	if _, err := s.DropPrevious(ctx, "b", "k", sw.Version, nil); err != nil {
		t.Fatal(err)
	}
	get("first")
	put(inline("b", "k", 3, "second"))
	get("second")
	if _, err := s.RollBack(ctx, "b", "k", ver(3)); err != nil {
		t.Fatal(err)
	}
	get("first")
}

// A confirmation's drop reads and writes the current manifest without its
// inline data (VersionsNoInline): the record keeps its data whatever the
// dropped versions held; a manifest read that way is refused as a newer
// version or as a previous version of another (it would lose the data),
// and the data stays.
func TestDropKeepsUnreadInlineData(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	for _, m := range []*Manifest{inline("b", "k", 1, "old data"), inline("b", "k", 2, "new data")} {
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	cur, prev, err := s.VersionsNoInline(ctx, "b", "k")
	if err != nil || len(cur.Inline) != 0 || len(prev) != 1 || len(prev[0].Inline) != 0 {
		t.Fatalf("VersionsNoInline: cur inline %q, %d previous (%v); want no data read", cur.Inline, len(prev), err)
	}
	if _, prev, err := s.Versions(ctx, "b", "k"); err != nil || len(prev) != 1 || string(prev[0].Inline) != "old data" {
		t.Fatalf("Versions: %d previous (%v); want one with its data", len(prev), err)
	}
	if dropped, err := s.DropPrevious(ctx, "b", "k", ver(2), nil); err != nil || len(dropped) != 1 {
		t.Fatalf("drop: %d dropped, %v", len(dropped), err)
	}
	check := func(step string) {
		t.Helper()
		raw, err := s.LookupRaw(ctx, "b", "k", true)
		if err != nil || string(raw.Current.Inline) != "new data" || len(raw.Previous) != 0 {
			t.Fatalf("%s: inline %q, %d previous (%v); want the new data alone", step, raw.Current.Inline, len(raw.Previous), err)
		}
	}
	check("after the drop")
	cur, _, err = s.VersionsNoInline(ctx, "b", "k")
	if err != nil {
		t.Fatal(err)
	}
	cur.Version = ver(3)
	oldCur, oldPrev, err := s.versionsLocked("b", "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.writeVersions("b", "k", oldCur, oldPrev, cur, nil); err == nil {
		t.Fatal("a manifest read without its inline data was stored as a newer version")
	}
	if err := s.writeVersions("b", "k", oldCur, oldPrev, oldCur, []*Manifest{cur}); err == nil {
		t.Fatal("a manifest read without its inline data was kept as a previous version")
	}
	check("after the refused write")
}

// inlineRecords returns every inline data record of the store: "i:"+key
// for the first layout's, "w:"+key+"@"+ts for a version's.
func inlineRecords(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range []byte{nsInline, nsInlineVersion} {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{ns}, UpperBound: []byte{ns + 1}})
		if err != nil {
			t.Fatal(err)
		}
		for valid := it.First(); valid; valid = it.Next() {
			_, rest, err := readEscaped(it.Key()[1:])
			if err != nil {
				t.Fatal(err)
			}
			name := "i:" + string(rest)
			if ns == nsInlineVersion {
				key, v, err := readEscaped(rest)
				if err != nil || len(v) < 8 {
					t.Fatalf("version inline key %q: %v", it.Key(), err)
				}
				name = fmt.Sprintf("w:%s@%d", key, binary.BigEndian.Uint64(v))
			}
			out[name] = string(it.Value())
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func wantRecords(t *testing.T, s *Store, step string, want map[string]string) {
	t.Helper()
	if got := inlineRecords(t, s); !maps.Equal(got, want) {
		t.Fatalf("%s: inline records %v, want %v", step, got, want)
	}
}

// A small object's data stays under its version's key while the version
// goes from current to previous and back: a tombstone or an overwrite
// writes no copy of it (the previous record carries none), readers of
// every kind still find it, and it goes with its version.
func TestInlineDataStaysWithItsVersion(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	put := func(m *Manifest) {
		t.Helper()
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	put(inline("b", "k", 1, "one"))
	wantRecords(t, s, "put", map[string]string{"w:k@1": "one"})

	put(tomb("b", "k", 2))
	wantRecords(t, s, "tombstone", map[string]string{"w:k@1": "one"})
	val, err := s.get(previousKey("b", "k", ver(1)))
	if err != nil || val[1]&flagInlineV == 0 || bytes.Contains(val, []byte(`"inline"`)) {
		t.Fatalf("previous record %q (%v): want the version flag and no data", val, err)
	}
	_, prev, err := s.Versions(ctx, "b", "k")
	if err != nil || len(prev) != 1 || string(prev[0].Inline) != "one" {
		t.Fatalf("Versions: %d previous (%v), want one with its data", len(prev), err)
	}
	if m, err := s.GetVersion(ctx, "b", "k", ver(1)); err != nil || string(m.Inline) != "one" {
		t.Fatalf("GetVersion: %v, want its data", err)
	}
	if raw, err := s.LookupRaw(ctx, "b", "k", true); err != nil || len(raw.Previous) != 1 || string(raw.Previous[0].Inline) != "one" {
		t.Fatalf("LookupRaw: %+v (%v), want the previous version's data", raw, err)
	}

	put(inline("b", "k", 3, "three"))
	wantRecords(t, s, "overwrite", map[string]string{"w:k@1": "one", "w:k@3": "three"})
	if raw, err := s.LookupRaw(ctx, "b", "k", true); err != nil || string(raw.Current.Inline) != "three" {
		t.Fatalf("LookupRaw: %+v (%v), want the current data", raw, err)
	}
	if _, err := s.RollBack(ctx, "b", "k", ver(3)); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, s, "rollback", map[string]string{"w:k@1": "one"})
	if _, err := s.RollBack(ctx, "b", "k", ver(2)); err != nil {
		t.Fatal(err)
	}
	if m, err := s.GetManifest(ctx, "b", "k"); err != nil || string(m.Inline) != "one" {
		t.Fatalf("after rolling the tombstone back: %v, want the first data current", err)
	}
	put(tomb("b", "k", 4))
	if _, err := s.DropPrevious(ctx, "b", "k", ver(4), nil); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, s, "drop", map[string]string{})
}

// Records of the first layout (the current version's data under 'i', a
// previous version's in its record) are read as before; a drop of
// previous versions leaves the current one's data where it is, and the
// first write that makes it previous moves it under its version's key.
func TestFirstLayoutReadAndMoved(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	v1, v2 := inline("b", "k", 1, "old data"), inline("b", "k", 2, "cur data")
	old, err := encodeValue(0, v1) // NB: with its data in the JSON
	if err != nil {
		t.Fatal(err)
	}
	cur, err := encodeValue(flagInline|flagPrevious, withoutInline(v2))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string][]byte{
		string(previousKey("b", "k", ver(1))): old,
		string(manifestKey("b", "k")):         cur,
		string(inlineKey("b", "k")):           []byte("cur data"),
	} {
		if err := s.db.Set([]byte(k), v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step, curData, prevData string) {
		t.Helper()
		c, prev, err := s.Versions(ctx, "b", "k")
		if err != nil || string(c.Inline) != curData {
			t.Fatalf("%s: current data %q (%v), want %q", step, c.Inline, err, curData)
		}
		if prevData != "" && (len(prev) != 1 || string(prev[0].Inline) != prevData) {
			t.Fatalf("%s: %d previous, want one with %q", step, len(prev), prevData)
		}
		raw, err := s.LookupRaw(ctx, "b", "k", true)
		if err != nil || string(raw.Current.Inline) != curData || (prevData != "" && string(raw.Previous[0].Inline) != prevData) {
			t.Fatalf("%s: LookupRaw %+v (%v)", step, raw, err)
		}
	}
	check("first layout", "cur data", "old data")
	if m, err := s.GetVersion(ctx, "b", "k", ver(1)); err != nil || string(m.Inline) != "old data" {
		t.Fatalf("GetVersion: %v, want the record's data", err)
	}
	if _, err := s.DropPrevious(ctx, "b", "k", ver(2), nil); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, s, "drop", map[string]string{"i:k": "cur data"})
	check("after the drop", "cur data", "")

	if _, err := s.PutManifest(ctx, tomb("b", "k", 3)); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, s, "tombstone", map[string]string{"w:k@2": "cur data"})
	if _, err := s.RollBack(ctx, "b", "k", ver(3)); err != nil {
		t.Fatal(err)
	}
	check("rolled back", "cur data", "")
	wantRecords(t, s, "rolled back", map[string]string{"w:k@2": "cur data"})
}

// Whatever the sequence of writes, rollbacks and drops, every version the
// store holds reads back the data it was written with, and the inline
// records are exactly those of the versions held (none left behind).
func TestInlineRecordsFollowVersions(t *testing.T) {
	switches := 0
	defer func() {
		if !t.Failed() && switches == 0 {
			t.Error("no switch was tried")
		}
	}()
	ctx := context.Background()
	for seed := int64(1); seed <= 20; seed++ {
		s := openMem(t, nil, "n1")
		rng := rand.New(rand.NewSource(seed))
		data := map[int64]string{} // what each version was written with
		var ts int64 = 10
		for step := range 60 {
			cur, _, err := s.Versions(ctx, "b", "k")
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			ts++
			var m *Manifest
			switch op := rng.Intn(8); {
			case op <= 1:
				data[ts] = fmt.Sprintf("data %d", ts)
				m = inline("b", "k", ts, data[ts])
			case op == 2:
				m = tomb("b", "k", ts)
			case op == 3:
				m = obj("b", "k", ts, nodes3, fmt.Sprintf("p%d", ts))
			case op == 4 && cur != nil:
				// NB: a late write, older than the current version.
				old := cur.Version.TS - 1 - rng.Int63n(3)
				if _, held := data[old]; !held && old > 0 {
					data[old] = fmt.Sprintf("late %d", old)
					m = inline("b", "k", old, data[old])
				}
			case op == 5 && cur != nil:
				if _, err := s.RollBack(ctx, "b", "k", cur.Version); err != nil {
					t.Fatal(err)
				}
			case op == 6 && cur != nil:
				if _, err := s.DropPrevious(ctx, "b", "k", cur.Version, nil); err != nil {
					t.Fatal(err)
				}
			case op == 7 && cur != nil && len(cur.Inline) > 0:
				// NB: a repair switch: the same data, named by the version
				// that wrote it.
				data[ts] = string(cur.Inline)
				m = inline("b", "k", ts, data[ts])
				m.DataOf = cur.DataVersion()
				switches++
			}
			if m != nil {
				if _, err := s.PutManifest(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			cur, prev, err := s.Versions(ctx, "b", "k")
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			want := map[string]string{}
			for _, v := range append([]*Manifest{cur}, prev...) {
				if v == nil {
					continue
				}
				if string(v.Inline) != data[v.Version.TS] && !(v.Deleted || len(v.Parts) > 0) {
					t.Fatalf("seed %d step %d: version %d reads %q, was written with %q", seed, step, v.Version.TS, v.Inline, data[v.Version.TS])
				}
				if len(v.Inline) > 0 {
					want[fmt.Sprintf("w:k@%d", v.DataVersion().TS)] = string(v.Inline)
				}
			}
			wantRecords(t, s, fmt.Sprintf("seed %d step %d", seed, step), want)
		}
	}
}

// A repair switch (a new version with its predecessor's data, DataOf)
// onto a server that holds that data writes none of it again: the data
// stays under the key of the version that wrote it, through the drop of
// that version and a second switch, until a write of new data and its
// confirmation leave no version naming it. A server that never held the
// data stores it under that same key.
func TestSwitchKeepsDataUnderItsWriter(t *testing.T) {
	ctx := context.Background()
	s := openMem(t, nil, "n1")
	data := string(bytes.Repeat([]byte("d"), 32<<10))
	put := func(m *Manifest) (wal uint64) {
		t.Helper()
		before := s.db.Metrics().WAL.BytesIn
		if _, err := s.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
		return s.db.Metrics().WAL.BytesIn - before
	}
	read := func(step string) {
		t.Helper()
		if m, err := s.GetManifest(ctx, "b", "k"); err != nil || string(m.Inline) != data {
			t.Fatalf("%s: GetManifest: %v, want the data", step, err)
		}
		if raw, err := s.LookupRaw(ctx, "b", "k", true); err != nil || string(raw.Current.Inline) != data {
			t.Fatalf("%s: LookupRaw read %d bytes (%v), want the data", step, len(raw.Current.Inline), err)
		}
	}
	switchOf := func(m *Manifest, ts int64) *Manifest {
		sw := inline("b", "k", ts, data)
		sw.DataOf = m.DataVersion()
		return sw
	}
	v1 := inline("b", "k", 1, data)
	put(v1)
	sw := switchOf(v1, 2)
	if wal := put(sw); wal >= 16<<10 {
		t.Errorf("the switch wrote %d bytes to the log, want its records alone (the data is %d bytes)", wal, len(data))
	}
	read("switched")
	if _, err := s.DropPrevious(ctx, "b", "k", sw.Version, nil); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, s, "first version dropped", map[string]string{"w:k@1": data})
	read("first version dropped")
	sw2 := switchOf(sw, 3)
	put(sw2)
	if _, err := s.DropPrevious(ctx, "b", "k", sw2.Version, nil); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, s, "second switch", map[string]string{"w:k@1": data})
	read("second switch")

	put(inline("b", "k", 4, "new"))
	if _, err := s.DropPrevious(ctx, "b", "k", ver(4), nil); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, s, "overwritten", map[string]string{"w:k@4": "new"})

	// A server that never held the first version.
	o := openMem(t, nil, "n4")
	if _, err := o.PutManifest(ctx, switchOf(v1, 2)); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, o, "a new holder", map[string]string{"w:k@1": data})
	if m, err := o.GetManifest(ctx, "b", "k"); err != nil || string(m.Inline) != data {
		t.Fatalf("a new holder read %d bytes (%v), want the data", len(m.Inline), err)
	}
}
