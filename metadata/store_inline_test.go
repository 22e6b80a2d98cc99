package metadata

import (
	"context"
	"testing"
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
