#!/usr/bin/env bash
# machine-limits.sh: what this machine can do, to set the data path's CPU
# budget beside (BENCHMARKS.md): loopback TCP, disk write with fsync, disk
# and page-cache read, Reed-Solomon encode and decode on one core.
#
#   scripts/machine-limits.sh [DIR]     # DIR: on the disk regen dev uses (default .)
#
# Each figure is a rate and, where it is CPU-bound, CPU seconds per GB
# (user+system of the process doing it). Nothing else should run.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.}
tmp=$(mktemp -d "$DIR/.machine-limits-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
SIZE_MB=${SIZE_MB:-1024}

echo "## $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# Loopback TCP: one stream, 1 MiB writes and reads, client and server in
# one process (both ends' CPU counted).
cat >"$tmp/loop.go" <<'EOF'
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

func cpu() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	total, _ := strconv.ParseInt(os.Args[1], 10, 64)
	total <<= 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	done := make(chan int64)
	go func() {
		c, _ := ln.Accept()
		buf := make([]byte, 1<<20)
		var n int64
		for {
			m, err := c.Read(buf)
			n += int64(m)
			if err == io.EOF {
				break
			}
		}
		done <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	buf := make([]byte, 1<<20)
	c0, t0 := cpu(), time.Now()
	for sent := int64(0); sent < total; sent += int64(len(buf)) {
		if _, err := c.Write(buf); err != nil {
			panic(err)
		}
	}
	c.Close()
	n := <-done
	secs, cs := time.Since(t0).Seconds(), cpu()-c0
	fmt.Printf("| loopback TCP, one stream | %.0f MB/s | %.2f CPU s/GB (both ends) |\n", float64(n)/1e6/secs, cs/(float64(n)/1e9))
}
EOF
echo "| what | rate | CPU |"
echo "| --- | --- | --- |"
(cd "$tmp" && go run loop.go "$SIZE_MB")

# Disk: write with fsync at the end (the shard servers' policy: write,
# sync_file_range writeback, fsync before the reply), read back from the
# page cache, and read with O_DIRECT (the disk itself).
ddrate() { grep -Eo '[0-9.]+ [kMG]B/s' | tail -1; }
w=$( { /usr/bin/time -f '%e %U %S' dd if=/dev/zero of="$tmp/f" bs=1M count="$SIZE_MB" conv=fsync 2>&1; } | tr '\n' ' ')
echo "| disk write 1 MiB blocks + fsync (dd conv=fsync) | $(echo "$w" | ddrate) | $(echo "$w" | awk -v gb="$(echo "$SIZE_MB * 1.048576 / 1000" | bc -l)" '{printf "%.2f CPU s/GB", ($(NF-1)+$NF)/gb}') |"
r=$( { /usr/bin/time -f '%e %U %S' dd if="$tmp/f" of=/dev/null bs=1M 2>&1; } | tr '\n' ' ')
echo "| read from page cache (dd bs=1M) | $(echo "$r" | ddrate) | $(echo "$r" | awk -v gb="$(echo "$SIZE_MB * 1.048576 / 1000" | bc -l)" '{printf "%.2f CPU s/GB", ($(NF-1)+$NF)/gb}') |"
if d=$(dd if="$tmp/f" of=/dev/null bs=1M iflag=direct 2>&1); then
	echo "| disk read, O_DIRECT (dd iflag=direct) | $(echo "$d" | ddrate) | - |"
fi
# Many small files, each written and fsynced with its directory (a shard
# file of a 1 MiB object is 171 KiB).
s=$( { /usr/bin/time -f '%e %U %S' bash -c 'for i in $(seq 200); do dd if=/dev/zero of="$0/s$i" bs=175k count=1 conv=fsync status=none; done; sync "$0"' "$tmp" 2>&1; } | tail -1)
echo "| 200 files of 175 KiB, each fsynced | $(echo "$s" | awk '{printf "%.0f files/s", 200/$1}') | - |"

# Reed-Solomon rs-6-3 at the gateway's 1 MiB chunk, one core.
echo
echo "RS encode/decode, one core (go test ./codec -bench):"
go test ./codec -run '^$' -bench 'EncodeChunk1M/rs-6-3$|Decode/rs-6-3' -benchtime 20x -cpu 1 2>/dev/null | grep -E '^Benchmark' || true
