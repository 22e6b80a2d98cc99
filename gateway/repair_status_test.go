package gateway

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// The cluster's batch runs from the first server's start to the last
// one's end; its prediction is the latest start + prediction. Batches of
// an earlier incident, more than batchGap before, are left out.
func TestClusterBatch(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(seconds(s)) }
	for _, tc := range []struct {
		name                 string
		spans                []batchSpan
		wantPred, wantElapse float64
	}{
		{"one server", []batchSpan{{at(0), 4, 5}}, 5, 4},
		{"staggered servers", []batchSpan{{at(2), 3, 2}, {at(0), 4, 3}, {at(1), 2, 6}}, 7, 5},
		{"earlier incident left out", []batchSpan{{at(0), 10, 20}, {at(300), 4, 3}, {at(301), 4, 2}}, 3, 5},
		{"second wave joins", []batchSpan{{at(0), 2, 2}, {at(30), 3, 4}}, 34, 33},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, e, ok := clusterBatch(tc.spans)
			if !ok || math.Abs(p-tc.wantPred) > 1e-9 || math.Abs(e-tc.wantElapse) > 1e-9 {
				t.Fatalf("clusterBatch = %v, %v, %v; want %v, %v", p, e, ok, tc.wantPred, tc.wantElapse)
			}
		})
	}
	if _, _, ok := clusterBatch(nil); ok {
		t.Fatal("no spans: ok")
	}
}

// A down server counts as seen once no worker takes it for live: workers
// that counted it, and a worker that joined after it died and never heard
// of it, both let it through; one still taking it for live holds it back.
func TestSeenByAll(t *testing.T) {
	for _, tc := range []struct {
		name     string
		seen, up map[string][]string
		want     []string
	}{
		{"all counted", map[string][]string{"a": {"x"}, "b": {"x"}}, map[string][]string{"a": {"b"}, "b": {"a"}}, []string{"x"}},
		{"one still takes it for live", map[string][]string{"a": {"x"}, "b": nil}, map[string][]string{"a": {"b"}, "b": {"a", "x"}}, nil},
		{"a newcomer never heard of it", map[string][]string{"a": {"x", "y"}, "new": nil}, map[string][]string{"a": {"new"}, "new": {"a"}}, []string{"x", "y"}},
		{"nothing down", map[string][]string{"a": nil}, map[string][]string{"a": {"b"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := seenByAll(tc.seen, tc.up); !slices.Equal(got, tc.want) {
				t.Fatalf("seenByAll = %v, want %v", got, tc.want)
			}
		})
	}
}

type fakeRepairClient shardrpc.RepairStatus

func (f fakeRepairClient) RepairStatus(context.Context, string) (shardrpc.RepairStatus, error) {
	return shardrpc.RepairStatus(f), nil
}

// A server's pending manifest sync and the keys its range syncs checked
// reach the admin status, so an operator (and scripts/scale-run.sh) can
// tell when a returned server is back in step.
func TestRepairStatusCarriesSync(t *testing.T) {
	for _, pending := range []bool{false, true} {
		src := shardRepairSource{fakeRepairClient{Sync: shardrpc.SyncCounts{Pending: pending, KeysSynced: 7}}}
		_, r, err := src.RepairStatus(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if pending {
			want = 1
		}
		if r.SyncPending != want || r.SyncKeys != 7 {
			t.Fatalf("pending %v: status sync_pending %d, sync_keys %d; want %d, 7", pending, r.SyncPending, r.SyncKeys, want)
		}
	}
}
