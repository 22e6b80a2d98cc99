package codec

import "testing"

// skipUnderRace skips a heavy test of single-goroutine arithmetic under
// the race detector: it has nothing to find there, and the instrumented
// byte loops take minutes (CI's race run); the normal run covers it.
func skipUnderRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("single-goroutine arithmetic: covered by the run without -race")
	}
}
