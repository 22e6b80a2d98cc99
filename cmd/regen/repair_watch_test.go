package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/regen-s3/regen/gateway"
	"github.com/regen-s3/regen/internal/cluster"
)

func TestWatchVerdict(t *testing.T) {
	node := func(id string, state cluster.State, errText string) gateway.NodeStatus {
		return gateway.NodeStatus{Member: cluster.Member{ID: id, State: state, Meta: cluster.Meta{Role: cluster.RoleShard}}, Error: errText}
	}
	healthy := []gateway.NodeStatus{node("a", cluster.StateAlive, ""), node("b", cluster.StateAlive, ""), node("c", cluster.StateAlive, "")}
	withDown := func(nodes ...gateway.NodeStatus) []gateway.NodeStatus {
		return append(append([]gateway.NodeStatus{}, healthy[:1]...), nodes...)
	}
	tests := []struct {
		name    string
		nodes   []gateway.NodeStatus
		stripes gateway.StripeStatus
		repair  gateway.RepairStatus
		peak    int64
		elapsed time.Duration
		done    bool
		state   string
	}{
		{name: "healthy, after the settle time", nodes: healthy, elapsed: 3 * time.Second, done: true, state: "redundant"},
		{name: "healthy, just started", nodes: healthy, elapsed: time.Second, state: "settling"},
		{name: "killed a moment ago: alive in gossip but unreachable",
			nodes: withDown(node("b", cluster.StateAlive, "connection refused")), elapsed: 5 * time.Second, state: "detecting"},
		{name: "suspect", nodes: withDown(node("b", cluster.StateSuspect, "")), elapsed: 5 * time.Second, state: "detecting"},
		{name: "dead, workers have not scanned since",
			nodes: withDown(node("b", cluster.StateDead, "")), elapsed: 5 * time.Second, state: "detecting"},
		{name: "dead, within the grace",
			nodes:   withDown(node("b", cluster.StateDead, "")),
			stripes: gateway.StripeStatus{Total: 20, Degraded: 20, Pending: 20, GraceLeftSeconds: 3, DownSeen: []string{"b"}},
			peak:    20, state: "grace"},
		{name: "repairing",
			nodes:   withDown(node("b", cluster.StateDead, "")),
			stripes: gateway.StripeStatus{Total: 20, Degraded: 5, DownSeen: []string{"b"}},
			repair:  gateway.RepairStatus{Running: 2}, peak: 20, state: "repairing"},
		{name: "no server to rebuild onto",
			nodes:   withDown(node("b", cluster.StateDead, "")),
			stripes: gateway.StripeStatus{Total: 20, Degraded: 8, LostShards: 8, Waiting: 8, DownSeen: []string{"b"}},
			repair:  gateway.RepairStatus{Queued: 1}, peak: 8, state: "capacity"},
		{name: "some wait for capacity, others repairing",
			nodes:   withDown(node("b", cluster.StateDead, "")),
			stripes: gateway.StripeStatus{Total: 20, Degraded: 8, Waiting: 3, DownSeen: []string{"b"}},
			repair:  gateway.RepairStatus{Running: 1}, peak: 8, state: "repairing"},
		{name: "last job running, nothing degraded any more",
			nodes:   withDown(node("b", cluster.StateDead, "")),
			stripes: gateway.StripeStatus{Total: 20, DownSeen: []string{"b"}},
			repair:  gateway.RepairStatus{Running: 1}, peak: 20, state: "repairing"},
		{name: "repaired: dead server counted, nothing degraded",
			nodes:   withDown(node("b", cluster.StateDead, "")),
			stripes: gateway.StripeStatus{Total: 20, DownSeen: []string{"b"}},
			peak:    20, done: true, state: "redundant"},
		{name: "a dead server that held nothing",
			nodes:   withDown(node("b", cluster.StateDead, "")),
			stripes: gateway.StripeStatus{Total: 20, DownSeen: []string{"b"}}, elapsed: time.Second, done: true, state: "redundant"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := gateway.Status{Nodes: tc.nodes, Stripes: &tc.stripes, Repair: &tc.repair}
			v := watchVerdict(st, tc.peak, tc.elapsed)
			if v.done != tc.done || v.state != tc.state {
				t.Errorf("done=%v state=%q, want done=%v state=%q (%s)", v.done, v.state, tc.done, tc.state, v.line)
			}
		})
	}
}

// repairStatus is a status of two shard servers, one dead and counted by
// the repair workers, with degraded of 40 stripes left to repair.
func repairStatus(degraded, running int64) gateway.Status {
	dead := gateway.NodeStatus{Member: cluster.Member{ID: "b", State: cluster.StateDead, Meta: cluster.Meta{Role: cluster.RoleShard}}}
	alive := gateway.NodeStatus{Member: cluster.Member{ID: "a", State: cluster.StateAlive, Meta: cluster.Meta{Role: cluster.RoleShard}}}
	return gateway.Status{Nodes: []gateway.NodeStatus{alive, dead},
		Stripes: &gateway.StripeStatus{Total: 40, Degraded: degraded, LostShards: degraded, DownSeen: []string{"b"}},
		Repair:  &gateway.RepairStatus{Running: running, Done: 20 - degraded, Methods: map[string]int64{"core": 20 - degraded}}}
}

// The repair watch draws its progress with the progressbar library: the
// bar fills as degraded stripes are repaired, out of the most seen, and
// the watch ends with a full bar and the summary.
func TestRepairWatchProgressBar(t *testing.T) {
	st := repairStatus
	srv, _ := statusServer(t, st(20, 4), st(10, 4), st(0, 0))
	var out strings.Builder
	if err := runAdmin(context.Background(), []string{"repair", "watch", "--endpoint", srv.URL, "--timeout", "30s"}, &out); err != nil {
		t.Fatalf("repair watch: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"(0/20)", "50%", "(10/20)", "degraded 10/40", "100%", "(20/20)", "█", "fully redundant: 40 stripes healthy"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, strings.ReplaceAll(got, "\r", "\n"))
		}
	}
}

// A watch that has seen the repair status rides out statuses without it
// (shard servers too busy to answer the gateway in time) and ends when
// the cluster is redundant; a watch that never saw one ends at once.
func TestRepairWatchRidesOutMissingStatus(t *testing.T) {
	st := repairStatus
	none := gateway.Status{Nodes: st(0, 0).Nodes}
	srv, _ := statusServer(t, st(20, 4), none, none, st(0, 0))
	var out strings.Builder
	if err := runAdmin(context.Background(), []string{"repair", "watch", "--json", "--endpoint", srv.URL, "--timeout", "30s"}, &out); err != nil {
		t.Fatalf("repair watch: %v\n%s", err, out.String())
	}
	if got := strings.Count(out.String(), `"state":"unavailable"`); got != 2 {
		t.Errorf("%d unavailable lines, want 2:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), `"state":"redundant"`) {
		t.Errorf("the watch did not end redundant:\n%s", out.String())
	}

	srv, _ = statusServer(t, none, st(0, 0))
	out.Reset()
	if err := runAdmin(context.Background(), []string{"repair", "watch", "--json", "--endpoint", srv.URL, "--timeout", "30s"}, &out); err == nil || !strings.Contains(err.Error(), "no repair status") {
		t.Errorf("watch with no status first = %v, want the no-repair-status error", err)
	}
}

// A watch stopped (Ctrl-C) while statuses are missing ends at once.
func TestRepairWatchStopsWhileStatusMissing(t *testing.T) {
	none := gateway.Status{Nodes: repairStatus(0, 0).Nodes}
	srv, _ := statusServer(t, repairStatus(20, 4), none)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	done := make(chan error, 1)
	var out strings.Builder
	go func() { done <- runAdmin(ctx, []string{"repair", "watch", "--json", "--endpoint", srv.URL}, &out) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("a stopped watch reported success:\n%s", out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not end after it was stopped")
	}
	if strings.Count(out.String(), "\n") > 10 {
		t.Errorf("the watch asked again and again after it was stopped:\n%s", out.String())
	}
}
