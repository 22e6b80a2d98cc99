//go:build linux

package chaos

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// procAttr makes a child die with regen chaos (Pdeathsig), however it
// ends, and puts it in its own process group.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// cmdline returns the command line of a running process, so a killed
// shard server can be started again exactly as regen dev started it.
func cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, fmt.Errorf("command line of pid %d: %w", pid, err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
}
