package repair

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestSettleWaitsForQuiet: settle returns once the signature has been the
// same for quiet, not before; a signature that keeps changing is given
// up on after max; a cancelled ctx ends the wait.
func TestSettleWaitsForQuiet(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	var calls atomic.Int64
	changing := func() string { // changes on each of its first 4 calls (~1 s)
		n := calls.Add(1)
		if n <= 4 {
			return string(rune('a' + n))
		}
		return "settled"
	}
	if !settle(ctx, changing, 500*time.Millisecond, 10*time.Second) {
		t.Fatal("settle reported a cancelled ctx")
	}
	if took := time.Since(start); took < 4*settlePoll+500*time.Millisecond-50*time.Millisecond {
		t.Fatalf("settle returned after %s, before the signature was quiet for 500ms", took)
	}

	start = time.Now()
	var n atomic.Int64
	never := func() string { return string(rune('a' + n.Add(1)%26)) }
	if !settle(ctx, never, time.Second, 700*time.Millisecond) || time.Since(start) > 3*time.Second {
		t.Fatalf("a signature that never settles: settle took %s, want about the max (700ms)", time.Since(start))
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if settle(cctx, never, time.Second, 10*time.Second) {
		t.Fatal("settle with a cancelled ctx reported true")
	}
}

// TestPeriodicSyncWhileBusy: while the repair queue is busy, a periodic
// anti-entropy pass runs once every busyPasses+1 ticks; otherwise at
// every tick.
func TestPeriodicSyncWhileBusy(t *testing.T) {
	busy := false
	s := &syncer{busy: func() bool { return busy }}
	for tick := range 5 {
		if !s.periodicDue() {
			t.Fatalf("idle queue: tick %d left out", tick)
		}
	}
	busy = true
	var ran []int
	for tick := range 3 * (busyPasses + 1) {
		if s.periodicDue() {
			ran = append(ran, tick)
		}
	}
	if want := []int{busyPasses, 2*busyPasses + 1, 3*busyPasses + 2}; !slices.Equal(ran, want) {
		t.Fatalf("busy queue: passes at ticks %v, want %v", ran, want)
	}
	busy = false
	if !s.periodicDue() {
		t.Fatal("queue idle again: the next tick was left out")
	}
	if !(&syncer{}).periodicDue() {
		t.Fatal("a syncer without busy left a pass out")
	}
}
