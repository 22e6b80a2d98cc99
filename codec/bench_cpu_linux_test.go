//go:build linux

package codec

import "syscall"

// threadCPU returns the CPU time of the calling OS thread in seconds. The
// benchmarks lock their goroutine to a thread and report throughput per
// CPU-second as well, which stays meaningful on a busy shared machine
// where wall-clock MB/s does not.
func threadCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
