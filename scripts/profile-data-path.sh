#!/usr/bin/env bash
# profile-data-path.sh: where the CPU of regen's object data path goes.
#
# For each object size it starts a fresh `regen dev` with --pprof, runs
# `regen bench s3 --workloads put,get` at that size, and while each
# workload runs it captures, over one window:
#   - CPU seconds (user+system, /proc) of the gateway, the 12 shard servers
#     together and the bench client, per GB of object data moved (the
#     gateway's regen_s3_bytes_{in,out}_total);
#   - Go CPU profiles (pprof) of the gateway and of every shard server, and
#     allocation profiles (the window's difference), per byte moved;
#   - syscalls (perf stat, raw_syscalls:sys_enter) of the gateway and the
#     shard servers, per MB moved;
#   - shard requests per object (regen_shard_{reads,writes}_total);
#   - RSS of the gateway and of the largest shard server at the end.
# and prints one table row per workload, and the top of each profile.
#
# Environment (optional): SIZES="1MiB 64MiB", DURATION=30s (each workload),
# WINDOW=15 (seconds profiled, starting 3 s into the workload), REGEN (a
# binary to profile; default: built from this tree), OUT (default: a new
# directory under /tmp), PPROF_PORT=16060 (gateway; shard i on +i),
# DEV_ARGS (more flags for regen dev, e.g. "--scrub-rate 0" to see the
# data path without the background scrubber).
#
# Counts (syscalls, requests, allocations per byte) do not depend on the
# machine's load; CPU seconds per GB do somewhat (cache misses, contention);
# throughput does a lot. Say which you report.
set -euo pipefail

cd "$(dirname "$0")/.."
SIZES=${SIZES:-"1MiB 64MiB"}
DURATION=${DURATION:-60s}
WINDOW=${WINDOW:-15}
PPROF_PORT=${PPROF_PORT:-16060}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/profile-data-path-XXXXXX")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ACCESS=profadmin
SECRET=profadmin-secret-key
if [ -z "${REGEN:-}" ]; then
	REGEN="$OUT/regen"
	go build -o "$REGEN" ./cmd/regen
fi

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

DEV_PID=
stop_dev() {
	# NB: background jobs of this script run the EXIT trap too; only the
	# script itself stops the cluster.
	if [ -n "$DEV_PID" ] && [ "$BASHPID" = "$$" ]; then
		kill "$DEV_PID" 2>/dev/null || true
		for _ in $(seq 150); do kill -0 "$DEV_PID" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$DEV_PID" 2>/dev/null || true
		DEV_PID=
	fi
}
trap stop_dev EXIT INT TERM

# cpu PID...: user+system CPU seconds of the processes, summed.
cpu() {
	local p
	for p in "$@"; do cat "/proc/$p/stat" 2>/dev/null || true; done |
		awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); t += $12 + $13} END {printf "%.3f\n", t / hz}'
}

# metric URL NAME: the value of a Prometheus counter (0 if absent).
metric() {
	curl -sf "$1/metrics" | awk -v n="$2" '$1 == n {printf "%.0f\n", $2; f=1} END {if (!f) print 0}'
}

sum_shard_metric() {
	local s=0 a v
	for a in "${SHARD_ADDRS[@]}"; do
		v=$(metric "http://$a" "$1")
		s=$(echo "$s + $v" | bc)
	done
	echo "$s"
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# capture WORKLOAD: one profiling window while it runs, into $OUT/WORKLOAD.
capture() {
	local phase=$1 dir="$OUT/$1" i
	mkdir -p "$dir"
	local gw="http://$ENDPOINT_HOST" in0 out0 rd0 wr0 c_gw0 c_sh0 c_cl0 t0
	in0=$(metric "$gw" regen_s3_bytes_in_total)
	out0=$(metric "$gw" regen_s3_bytes_out_total)
	rd0=$(sum_shard_metric regen_shard_reads_total)
	wr0=$(sum_shard_metric regen_shard_writes_total)
	curl -sf -o "$dir/gw.allocs0" "http://127.0.0.1:$PPROF_PORT/debug/pprof/allocs"
	for i in $(seq ${#SHARD_PIDS[@]}); do
		curl -sf -o "$dir/shard-$i.allocs0" "http://127.0.0.1:$((PPROF_PORT + i))/debug/pprof/allocs"
	done
	c_gw0=$(cpu "$DEV_PID")
	c_sh0=$(cpu "${SHARD_PIDS[@]}")
	c_cl0=$(cpu "$BENCH_PID")
	t0=$(date +%s.%N)
	local jobs=()
	curl -sf -o "$dir/gw.cpu" "http://127.0.0.1:$PPROF_PORT/debug/pprof/profile?seconds=$WINDOW" &
	jobs+=($!)
	for i in $(seq ${#SHARD_PIDS[@]}); do
		curl -sf -o "$dir/shard-$i.cpu" "http://127.0.0.1:$((PPROF_PORT + i))/debug/pprof/profile?seconds=$WINDOW" &
		jobs+=($!)
	done
	perf stat -x, -e raw_syscalls:sys_enter -p "$DEV_PID" -o "$dir/gw.syscalls" -- sleep "$WINDOW" 2>/dev/null &
	jobs+=($!)
	perf stat -x, -e raw_syscalls:sys_enter -p "$(IFS=,; echo "${SHARD_PIDS[*]}")" -o "$dir/shards.syscalls" -- sleep "$WINDOW" 2>/dev/null &
	jobs+=($!)
	wait "${jobs[@]}"
	local t1
	t1=$(date +%s.%N)
	cat >"$dir/window.env" <<-EOV
		secs=$(echo "$t1 - $t0" | bc)
		c_gw=$(echo "$(cpu "$DEV_PID") - $c_gw0" | bc)
		c_sh=$(echo "$(cpu "${SHARD_PIDS[@]}") - $c_sh0" | bc)
		c_cl=$(echo "$(cpu "$BENCH_PID") - $c_cl0" | bc)
		bytes=$(($(metric "$gw" regen_s3_bytes_in_total) - in0 + $(metric "$gw" regen_s3_bytes_out_total) - out0))
		rd=$(($(sum_shard_metric regen_shard_reads_total) - rd0))
		wr=$(($(sum_shard_metric regen_shard_writes_total) - wr0))
		rss_gw=$(rss_kb "$DEV_PID")
		rss_sh=$(for p in "${SHARD_PIDS[@]}"; do rss_kb "$p"; done | sort -n | tail -1)
		size_bytes=$SIZE_BYTES
	EOV
	curl -sf -o "$dir/gw.allocs1" "http://127.0.0.1:$PPROF_PORT/debug/pprof/allocs"
	for i in $(seq ${#SHARD_PIDS[@]}); do
		curl -sf -o "$dir/shard-$i.allocs1" "http://127.0.0.1:$((PPROF_PORT + i))/debug/pprof/allocs"
	done
}

# summarize DIR: the table row of a captured window.
summarize() {
	local dir=$1 phase secs c_gw c_sh c_cl bytes rd wr rss_gw rss_sh size_bytes i r
	phase=$(basename "$dir")
	# shellcheck disable=SC1091
	. "$dir/window.env"
	local objects sc_gw sc_sh a_gw a_sh
	objects=$(echo "scale=2; $bytes / $size_bytes" | bc)
	sc_gw=$(awk -F, '/raw_syscalls/ {print $1}' "$dir/gw.syscalls")
	sc_sh=$(awk -F, '/raw_syscalls/ {print $1}' "$dir/shards.syscalls")
	# Bytes allocated in the window (alloc_space of allocs1 less allocs0).
	a_gw=$(go tool pprof -sample_index=alloc_space -raw -base "$dir/gw.allocs0" "$REGEN" "$dir/gw.allocs1" 2>/dev/null | alloc_total)
	a_sh=0
	for i in $(seq 12); do
		[ -f "$dir/shard-$i.allocs1" ] || continue
		r=$(go tool pprof -sample_index=alloc_space -raw -base "$dir/shard-$i.allocs0" "$REGEN" "$dir/shard-$i.allocs1" 2>/dev/null | alloc_total)
		a_sh=$((a_sh + r))
	done
	local gb
	gb=$(echo "scale=6; $bytes / 1000000000" | bc)
	if [ "$bytes" -le 0 ]; then
		log "$phase: no bytes moved in the window"
		return
	fi
	printf '| %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f | %.1f | %.2f | %.2f | %d | %d |\n' \
		"$phase" "$(echo "$bytes / 1000000 / $secs" | bc -l)" \
		"$(echo "$c_gw / $gb" | bc -l)" "$(echo "$c_sh / $gb" | bc -l)" "$(echo "$c_cl / $gb" | bc -l)" \
		"$(echo "($c_gw + $c_sh + $c_cl) / $gb" | bc -l)" \
		"$(echo "${sc_gw:-0} / ($bytes / 1000000)" | bc -l)" "$(echo "${sc_sh:-0} / ($bytes / 1000000)" | bc -l)" \
		"$(echo "($rd + $wr) / $objects" | bc -l)" \
		"$(echo "$a_gw / $bytes" | bc -l)" "$(echo "$a_sh / $bytes" | bc -l)" \
		$((rss_gw / 1024)) $((rss_sh / 1024)) | tee -a "$OUT/table.md"
}

# alloc_total sums the alloc_space samples of `pprof -raw` output.
alloc_total() {
	awk '/^Samples:/ {s=1; next} /^Locations/ {s=0} s && $4 ~ /:$/ {t += $2} END {printf "%.0f\n", t}'
}

{
	echo "| workload | MB/s | gateway CPU s/GB | shards CPU s/GB | client CPU s/GB | total CPU s/GB | gateway syscalls/MB | shard syscalls/MB | shard requests/object | gateway alloc B/B | shard alloc B/B | gateway RSS MiB | max shard RSS MiB |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$OUT/table.md"

for size in $SIZES; do
	SIZE_BYTES=$(numfmt --from=iec-i "${size%B}")
	data="$OUT/dev-$size"
	rm -rf "$data"
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
	REGEN_ACCESS_KEY=$ACCESS REGEN_SECRET_KEY=$SECRET "$REGEN" dev --data "$data" --addr "127.0.0.1:$port" \
		--pprof "127.0.0.1:$PPROF_PORT" ${DEV_ARGS:-} >"$data.log" 2>&1 &
	DEV_PID=$!
	ENDPOINT_HOST="127.0.0.1:$port"
	for _ in $(seq 600); do [ -f "$data/dev.json" ] && break; sleep 0.2; done
	mapfile -t SHARD_PIDS < <(jq -r '.shards[].pid' "$data/dev.json")
	mapfile -t SHARD_ADDRS < <(jq -r '.shards[].addr' "$data/dev.json")
	sleep 5
	log "$size: benchmarking"
	"$REGEN" bench s3 --json --endpoint "http://$ENDPOINT_HOST" --access $ACCESS --secret $SECRET \
		--workloads put,get --sizes "$size" --duration "$DURATION" >"$OUT/bench-$size.jsonl" 2>"$OUT/bench-$size.err" &
	BENCH_PID=$!
	for phase in "put-$size" "get-$size"; do
		for _ in $(seq 3000); do grep -q " $phase started" "$OUT/bench-$size.err" && break; sleep 0.1; done
		sleep 3
		capture "$phase"
	done
	wait "$BENCH_PID" || log "$size: the bench reported errors: $(tail -3 "$OUT/bench-$size.err")"
	stop_dev
done

cat "$OUT/table.md"
for d in "$OUT"/*/; do
	[ -f "$d/window.env" ] && summarize "${d%/}"
done
for d in "$OUT"/*/; do
	[ -f "$d/gw.cpu" ] || continue
	echo
	echo "## $(basename "$d"): gateway"
	go tool pprof -top -nodecount=25 "$REGEN" "$d/gw.cpu" 2>/dev/null | sed -n '4,32p'
	echo
	echo "## $(basename "$d"): shard servers (merged)"
	go tool pprof -top -nodecount=25 "$REGEN" "$d"/shard-*.cpu 2>/dev/null | sed -n '4,32p'
done >"$OUT/profiles.txt"
log "table in $OUT/table.md, profile tops in $OUT/profiles.txt, profiles under $OUT/<workload>/"
