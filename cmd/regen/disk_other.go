//go:build !linux

package main

func diskCapacity(dir string) int64 { return 0 }
