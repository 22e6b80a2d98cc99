package repair

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/regen-s3/regen/internal/shardrpc"
)

// While a batch runs, the worker asks the live servers of its own host
// for their batch CPU, keeps each one's largest figure, and predicts its
// batch again with them; servers of other hosts are not asked.
func TestHostPeersRevisePrediction(t *testing.T) {
	f := newFakeCluster(5)
	for i := range f.members {
		host := "10.0.0.1"
		if i == 4 {
			host = "10.0.0.2" // another machine
		}
		f.members[i].HTTP = fmt.Sprintf("%s:%d", host, 9000+i)
	}
	f.batchCPU = map[string]float64{"10.0.0.1:9001": 3, "10.0.0.1:9002": 0.5, "10.0.0.2:9004": 100}
	w := newTestWorker(t, f, "n0")
	cm := w.cal.model()
	cm.Cores = 2
	w.cal.setModel(cm)
	w.sched.batch, w.sched.batchT0 = &shardrpc.RepairBatch{}, time.Now()
	w.sched.batchCosts = []Cost{{Seconds: 0.1, CPU: 1}, {Seconds: 0.1, CPU: 1}}
	w.sched.lastShare = 0.25

	w.hostPeers(context.Background(), w.view())
	if want := map[string]float64{"n1": 3, "n2": 0.5, "n3": 0}; !maps.Equal(w.sched.peerCPU, want) {
		t.Fatalf("peer CPU %v, want %v", w.sched.peerCPU, want)
	}
	// 2 core-seconds here, min(2,3) + 0.5 + 0 beside it, on 2 cores.
	w.sched.mu.Lock()
	w.sched.predictBatch(w.cal.model())
	got := w.sched.batch.Predicted
	w.sched.mu.Unlock()
	if want := (2 + 2 + 0.5) / 2.0; got != want {
		t.Fatalf("predicted %v, want %v", got, want)
	}
	// A peer that finished reports less: its largest figure is kept.
	f.batchCPU["10.0.0.1:9001"] = 0
	w.hostPeers(context.Background(), w.view())
	if got := w.sched.peerCPU["n1"]; got != 3 {
		t.Fatalf("n1 kept %v, want 3", got)
	}
	if got := slices.Sorted(maps.Keys(w.sched.peerCPU)); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("peers %v", got)
	}
}

// Servers advertising the same machine share a host whatever their
// addresses (containers); without it the address's host decides.
func TestHostOf(t *testing.T) {
	a := NodeInfo{Addr: "172.18.0.2:9000", Machine: "boot-1"}
	b := NodeInfo{Addr: "172.18.0.3:9000", Machine: "boot-1"}
	c := NodeInfo{Addr: "172.18.0.4:9000", Machine: "boot-2"}
	d := NodeInfo{Addr: "10.0.0.1:9000"}
	e := NodeInfo{Addr: "10.0.0.1:9001"}
	if hostOf(a) != hostOf(b) || hostOf(a) == hostOf(c) || hostOf(d) != hostOf(e) || hostOf(d) == hostOf(a) {
		t.Fatalf("hosts: %q %q %q %q %q", hostOf(a), hostOf(b), hostOf(c), hostOf(d), hostOf(e))
	}
}
