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
	m = startMeter()
	x := 0
	for t0 := time.Now(); time.Since(t0) < 100*time.Millisecond; {
		x++
	}
	if s := m.seconds(); s < 0.01 {
		t.Fatalf("busy 100ms counted only %.4fs of CPU (%d)", s, x)
	}
}
