//go:build linux

package main

import "syscall"

// childProcAttr makes a dev child die with its parent (Pdeathsig), however
// the parent ends, and puts it in its own process group.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
