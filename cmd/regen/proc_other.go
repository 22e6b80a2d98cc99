//go:build unix && !linux

package main

import "syscall"

// childProcAttr puts a dev child in its own process group; only Linux can
// also tie its life to the parent's.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
