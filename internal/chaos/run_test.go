package chaos

import (
	"testing"
	"time"
)

func TestAnnotateNamesTheFaultsInPlace(t *testing.T) {
	s := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	events := []Event{{s(1), "kill -9 shards 1"}, {s(30), "kill -9 shards 2,3"}, {s(40), "heal"}, {s(90), "later"}}
	fs := []Finding{{Kind: Stale, Ops: []Op{{Start: s(0), End: s(1)}, {Start: s(44), End: s(45)}}}}
	annotate(fs, events)
	if got := fs[0].Nemesis; len(got) != 2 || got[0].What != "kill -9 shards 2,3" || got[1].What != "heal" {
		t.Fatalf("nemesis %v, want the kill at 30s and the heal at 40s", got)
	}
}
