//go:build unix

package main

import "syscall"

// privateFiles makes every file and directory this process creates
// readable by its user only (umask 077): shard files, the pebble DB (whose
// files pebble creates itself), logs. Objects are other people's data.
func privateFiles() { syscall.Umask(0o077) }
