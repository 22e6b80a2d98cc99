//go:build !linux

package shardserver

// startWriteback is a no-op where sync_file_range does not exist.
func startWriteback(f File, off, n int64) {}
