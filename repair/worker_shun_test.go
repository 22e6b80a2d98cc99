package repair

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// A node a failed task blamed is planned around (suspect) for a while,
// then used again; errors naming no node, or this node, shun nobody.
func TestBlamedNodeIsShunnedForAWhile(t *testing.T) {
	f := newFakeCluster(4)
	w := newTestWorker(t, f, "n0")
	now := time.Unix(1000, 0)
	w.now = func() time.Time { return now }
	suspect := func(id string) bool { return w.view().nodes[id].Suspect }

	for _, err := range []error{
		errors.New("plain"),
		&ExecError{Op: "decode", Err: errors.New("no node")},
		&ExecError{Node: "n0", Op: "write rebuilt shard", Err: errors.New("self")},
	} {
		w.mu.Lock()
		w.blamed(err)
		w.mu.Unlock()
	}
	for _, id := range []string{"n0", "n1", "n2", "n3"} {
		if suspect(id) {
			t.Fatalf("%s suspect after errors blaming no other node", id)
		}
	}
	w.mu.Lock()
	w.blamed(fmt.Errorf("repair pull-rep: %w", &ExecError{Node: "n2", Op: "read helper", Err: errors.New("connection refused")}))
	w.mu.Unlock()
	if !suspect("n2") || suspect("n1") {
		t.Fatalf("after blaming n2: n2 suspect %v, n1 suspect %v", suspect("n2"), suspect("n1"))
	}
	now = now.Add(shunFor + time.Second)
	if suspect("n2") {
		t.Fatal("n2 still suspect after shunFor")
	}
}
