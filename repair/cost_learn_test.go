package repair

import (
	"math"
	"testing"
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
