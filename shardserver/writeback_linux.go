package shardserver

import "syscall"

// startWriteback asks the kernel to start writing [off, off+n) of f to
// disk without waiting for it (sync_file_range SYNC_FILE_RANGE_WRITE), so
// the fsync that ends a shard write finds little left to flush. Best
// effort: files without a descriptor (test fakes) are skipped.
func startWriteback(f File, off, n int64) {
	if fd, ok := f.(interface{ Fd() uintptr }); ok {
		_ = syscall.SyncFileRange(int(fd.Fd()), off, n, 2 /* SYNC_FILE_RANGE_WRITE */)
	}
}
