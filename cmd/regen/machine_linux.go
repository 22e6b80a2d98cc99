//go:build linux

package main

import (
	"os"
	"strings"
)

// machineID identifies the running kernel: every container and process
// of one machine reads the same boot ID, so shard servers in containers
// know which of them share a CPU.
func machineID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
