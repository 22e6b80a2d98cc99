//go:build !linux

package main

// machineID is unknown here: servers are grouped by address instead.
func machineID() string { return "" }
