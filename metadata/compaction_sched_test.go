package metadata

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// The store's own compaction scheduler must still compact: flushed tables
// pile up in L0 until a grant lets a compaction move them down. Once the
// DB is quiet its granter stops polling (nothing waits).
func TestQuietSchedulerCompacts(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sched := s.sched
	val := make([]byte, 512)
	for f := range 12 { // more flushed tables than L0's compaction threshold
		for i := range 200 {
			if err := s.db.Set(fmt.Appendf(nil, "k%06d", i*12+f), val, pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.db.Metrics().Compact.Count == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no compaction after 12 flushes: %s", s.db.Metrics())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		sched.mu.Lock()
		waiting, running := sched.waiting, sched.running
		sched.mu.Unlock()
		if !waiting && running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("scheduler still busy after the compactions: waiting %v, running %d", waiting, running)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
