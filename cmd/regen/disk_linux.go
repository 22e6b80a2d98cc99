//go:build linux

package main

import "syscall"

// diskCapacity is the size of the filesystem holding dir, 0 if unknown.
func diskCapacity(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * int64(st.Bsize)
}
