//go:build unix

package repair

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used.
// Calibration measures rates in CPU time, not wall time: every shard
// server on a host calibrates at about the same moment (they start
// together), and wall time would measure their contention, different on
// each server, instead of the cost of a byte. The model divides the host's
// cores among its servers itself (Batch's share).
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
