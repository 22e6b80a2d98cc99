//go:build unix && !linux

package chaos

import (
	"errors"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// cmdline needs /proc: the nemesis restarts shard servers with the
// command line regen dev gave them.
func cmdline(pid int) ([]string, error) {
	return nil, errors.New("regen chaos restarts shard servers from /proc/PID/cmdline: Linux only")
}
