package gateway

import (
	"context"
	"slices"
	"testing"

	"github.com/regen-s3/regen/metadata"
)

// These tests replay, against the fake shard servers, the two ways found
// for chaos seed 8383 on 91e6634 (a HEAD read chaos-rs/key-06 after an
// acknowledged DELETE, while a manifest sync was moving that object): a
// lookup's first four answers all name a version V the DELETE's tombstone
// T replaced, one of them marked committed, because some of the four hold
// V outside V's placement (a manifest sync stores the newer version it
// takes from its peers whatever that version's placement: repair
// worker_sync.go, syncLocal) and T goes to V's placement only (rule 2).
// The mark's argument (decide) counts on every holder of V being one that
// T's write quorum meets.

// storeSynced stores m on the servers at positions of the key's order,
// as a manifest sync that took m from its peers does (confirmedNewer):
// whatever m's placement, and without a committed mark.
func storeSynced(f *fakeManifests, order []string, m *metadata.Manifest, positions ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, i := range positions {
		f.store("a"+order[i][1:], m)
	}
}

// deleteAcked runs a DELETE of b/k and fails the test unless it was
// acknowledged with a tombstone.
func deleteAcked(t *testing.T, g *Gateway, f *fakeManifests) {
	t.Helper()
	if err := g.deleteKey(context.Background(), "b", "k"); err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	if n := f.distinctVersions("b", "k", func(m *metadata.Manifest) bool { return m.Deleted }); n != 1 {
		t.Fatalf("DELETE acknowledged with %d tombstones written, want 1", n)
	}
}

// TestMarkedOutsidePlacementAfterDelete: the gateway's own marks, no
// repair switch. With 12 servers s0..s11 in the key's order:
//
//  1. an older version U is on s0..s8;
//  2. s0 and s1 are down: a PUT of V goes to the first nine live, s2..s10,
//     all nine store it and are told it is committed (marked);
//  3. s0 and s1 return; their manifest sync takes V (nine holders, over
//     U) from their peers: they hold V, unmarked, outside its placement;
//  4. s2 and s3 are down: a DELETE reads V and writes T to V's placement,
//     stored by the seven live ones, s4..s10: acknowledged;
//  5. s2 and s3 return, before the MRF hand-over or their sync gives them
//     T, still holding V marked.
//
// A HEAD then asks s0..s3: V, V, V marked, V marked, and five of the
// first nine unasked (< minK): decide's marked rule returns V, a value the
// acknowledged DELETE removed. Counting votes instead finds T (seven
// holders) past the first nine. Never more than two servers were down at
// once.
func TestMarkedOutsidePlacementAfterDelete(t *testing.T) {
	ctx := context.Background()
	g, f, kill := fakeCluster(t, 12)
	order, _ := g.layer.manifestOrder("b", "k")
	putFake(g, f, "b", "k") // U

	kill(idx(order[0]), idx(order[1]))
	v := &metadata.Manifest{Bucket: "b", Key: "k", Code: "rs-6-3", Placement: slices.Clone(order[2:11]), Size: 1, Inline: []byte("v"), ETag: "v"}
	if err := g.commit(ctx, v, v.Placement, 7, nil); err != nil {
		t.Fatalf("PUT with s0, s1 down: %v", err)
	}
	markFake(f, v)

	kill()
	storeSynced(f, order, v, 0, 1)

	kill(idx(order[2]), idx(order[3]))
	deleteAcked(t, g, f)

	kill()
	if m, err := g.layer.readHead(ctx, "b", "k"); err != errNotFound {
		t.Fatalf("HEAD after the acknowledged DELETE: %v, %v; want not found", m, err)
	}
}

// TestMarkedSwitchAfterDelete: as TestMarkedOutsidePlacementAfterDelete
// with the repair switch of 91e6634, which announced switches as
// committed (repair notifyCommitted, taken out in cfc2382):
//
//  1. V is on s0..s8, marked;
//  2. s0, s1, s2 die past the repair grace: the switch V' (V.TS+1ns,
//     placement s9, s10, s11, s3..s8) is written to the six live old
//     servers and the three new ones; with notices, all nine mark it;
//  3. s0..s2 return; their sync takes V' from the nine holders;
//  4. s3 and s4 are down: a DELETE reads V' and writes T to V”s
//     placement, stored by s5..s11: acknowledged;
//  5. s3 and s4 return, holding V' (marked when switches were announced).
//
// A HEAD asks s0..s3: V' four times. With the switch's marks, s3's makes
// it the answer: the deleted object. Without them (main) no answer is
// marked, the vote rule asks on and finds T. Only the repaired version's
// marks differ between the subtests.
func TestMarkedSwitchAfterDelete(t *testing.T) {
	for _, tc := range []struct {
		name      string
		announced bool // the switch's servers marked it (91e6634)
	}{{"switch not announced (main)", false}, {"switch announced (91e6634)", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			g, f, kill := fakeCluster(t, 12)
			order, _ := g.layer.manifestOrder("b", "k")
			v := putFake(g, f, "b", "k")
			markFake(f, v)

			kill(idx(order[0]), idx(order[1]), idx(order[2]))
			sw := *v
			sw.Version = metadata.Version{TS: v.Version.TS + 1, Writer: "repair-s3"}
			sw.Placement = append(slices.Clone(order[9:12]), order[3:9]...)
			storeSynced(f, order, &sw, 3, 4, 5, 6, 7, 8, 9, 10, 11)
			if tc.announced {
				markFake(f, &sw)
			}

			kill()
			storeSynced(f, order, &sw, 0, 1, 2)

			kill(idx(order[3]), idx(order[4]))
			deleteAcked(t, g, f)

			kill()
			if m, err := g.layer.readHead(ctx, "b", "k"); err != errNotFound {
				t.Fatalf("HEAD after the acknowledged DELETE: %v, %v; want not found", m, err)
			}
		})
	}
}

// TestMarkedStaleAfterNewerWrite (the lead's second interleaving): V on
// s0..s8, all up, marked; s2 and s3 down, a newer V2 is placed on s0, s1,
// s4..s10, and s0 and s1 fail its manifest write while staying live: V2
// is stored by s4..s10 (k+1) and acknowledged. s2 and s3 return holding
// V, marked. s0..s3 are all of V's placement and all name V: only
// counting votes finds V2 (s4 and s5 name it, its unanswered placement
// keeps it possible).
func TestMarkedStaleAfterNewerWrite(t *testing.T) {
	ctx := context.Background()
	g, f, kill := fakeCluster(t, 12)
	order, _ := g.layer.manifestOrder("b", "k")
	v := putFake(g, f, "b", "k")
	markFake(f, v)

	kill(idx(order[2]), idx(order[3]))
	f.refuse = map[string]bool{"a" + order[0][1:]: true, "a" + order[1][1:]: true}
	placement := append(slices.Clone(order[0:2]), order[4:11]...)
	v2 := &metadata.Manifest{Bucket: "b", Key: "k", Code: "rs-6-3", Placement: placement, Size: 1, Inline: []byte("v2"), ETag: "v2"}
	if err := g.commit(ctx, v2, placement, 7, nil); err != nil {
		t.Fatalf("PUT of V2 on s4..s10: %v", err)
	}
	markFake(f, v2)
	f.refuse = nil

	kill()
	if m, err := g.layer.readHead(ctx, "b", "k"); err != nil || m.ETag != "v2" {
		t.Fatalf("HEAD after V2 was acknowledged: %v, %v; want V2", m, err)
	}
}
