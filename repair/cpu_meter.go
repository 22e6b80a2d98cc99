package repair

import "time"

// cpuMeter times a measurement in process CPU time where the platform has
// it, else in wall time.
type cpuMeter struct {
	wall time.Time
	cpu  time.Duration
	ok   bool
}

func startMeter() cpuMeter {
	cpu, ok := processCPU()
	return cpuMeter{wall: time.Now(), cpu: cpu, ok: ok}
}

// seconds since start, at least a microsecond.
func (m cpuMeter) seconds() float64 {
	if m.ok {
		if cpu, ok := processCPU(); ok {
			return max((cpu - m.cpu).Seconds(), 1e-6)
		}
	}
	return max(time.Since(m.wall).Seconds(), 1e-6)
}
