package repair

import (
	"math"
	"testing"
	"time"
)

// The first window sets the learned rate; later ones move it by
// moveWeight, averaging costs (seconds per byte), not rates.
func TestMoveLearner(t *testing.T) {
	var l moveLearner
	if got := l.observe(1, 500e6); math.Abs(got-500e6) > 1 {
		t.Fatalf("first window: %v, want 500e6", got)
	}
	// A window at 1 GB/s: cost 0.7*2ns + 0.3*1ns = 1.7ns.
	if got, want := l.observe(0.5, 500e6), 1/1.7e-9; math.Abs(got-want) > 1e3 {
		t.Fatalf("second window: %v, want %v", got, want)
	}
}

// The disk calibration measures quickly after start-up, then backs off
// while its measurements find nothing better, up to an hour, and comes
// back to a minute when one does.
func TestRecalibrateWait(t *testing.T) {
	for _, c := range []struct {
		n, same int
		want    time.Duration
	}{
		{0, 0, time.Second},
		{4, 4, time.Second},
		{5, 0, time.Minute},
		{6, 1, 2 * time.Minute},
		{9, 4, 16 * time.Minute},
		{11, 6, time.Hour},
		{100, 95, time.Hour},
		{101, 0, time.Minute},
	} {
		if got := recalibrateWait(c.n, c.same); got != c.want {
			t.Errorf("recalibrateWait(%d, %d) = %v, want %v", c.n, c.same, got, c.want)
		}
	}
}

// Only a gain of more than a tenth counts as a better disk for the
// calibration's cadence: a measurement's noise does not.
func TestClearGain(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want bool
	}{
		{110, 100, false},
		{111, 100, true},
		{105, 100, false},
		{1, 0, false},
		{0, 100, false},
	} {
		if got := clearGain(c.a, c.b); got != c.want {
			t.Errorf("clearGain(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if !clearGain(2*time.Millisecond, time.Millisecond) || clearGain(time.Millisecond+50*time.Microsecond, time.Millisecond) {
		t.Error("clearGain of durations")
	}
}
