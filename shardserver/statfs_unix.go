//go:build linux || darwin || freebsd

package shardserver

import "syscall"

// diskUsage returns the used and available bytes of the file system
// holding dir.
func diskUsage(dir string) (used, free int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	bs := int64(st.Bsize)
	return (int64(st.Blocks) - int64(st.Bfree)) * bs, int64(st.Bavail) * bs, nil
}
