package repair

import (
	"testing"
	"time"
)

// The meter counts CPU spent, not time waited: a sleep costs (almost)
// nothing, a busy loop costs about its length.
func TestCPUMeterCountsWorkNotWaiting(t *testing.T) {
	if _, ok := processCPU(); !ok {
		t.Skip("no process CPU time on this platform") // wall-time fallback, nothing to tell apart
	}
	m := startMeter()
	time.Sleep(200 * time.Millisecond)
	if s := m.seconds(); s > 0.1 {
		t.Fatalf("sleeping 200ms counted %.3fs of CPU", s)
	}
	// A fixed amount of work (about 0.05 s of one core), not a fixed
	// time: on a loaded machine a loop that runs for 100ms of wall time
	// may get only a few ms of CPU.
	m = startMeter()
	x := 0
	for i := range 100_000_000 {
		x += i ^ (x >> 3)
	}
	if s := m.seconds(); s < 0.01 {
		t.Fatalf("100M loop iterations counted only %.4fs of CPU (%d)", s, x)
	}
}
