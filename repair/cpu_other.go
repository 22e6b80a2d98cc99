//go:build !unix

package repair

import "time"

// processCPU is not available here; calibration falls back to wall time.
func processCPU() (time.Duration, bool) { return 0, false }
