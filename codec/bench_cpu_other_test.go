//go:build !linux

package codec

func threadCPU() float64 { return 0 }
