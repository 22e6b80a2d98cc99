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
#   - shard data requests per object (regen_shard_{reads,writes}_total),
#     and all shard-server requests per object (every route: manifests,
#     versions, shards);
#   - RSS of the gateway and of the largest shard server at the end.
# and prints one table row per workload, and the top of each profile.
#
# Environment (optional): SIZES="1MiB 64MiB", DURATION=30s (each workload),
# COUNT (bound each workload by this many objects instead of DURATION, and
# measure all of it: no CPU profiles then, the rest as above; e.g.
# COUNT=200 SIZES=1MiB, COUNT=10 SIZES=64MiB),
# IDLE=10 (seconds of an idle cluster measured first, its background CPU),
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

# shard_requests: every request the shard servers answered (all routes:
# shards, manifests, versions), summed.
shard_requests() {
	local a
	for a in "${SHARD_ADDRS[@]}"; do
		curl -sf "http://$a/metrics" | awk '$1 ~ /^regen_shardserver_request_duration_seconds_count/ {t += $2} END {printf "%.0f\n", t}'
	done | awk '{t += $1} END {printf "%.0f\n", t}'
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# window_begin DIR: the counters at the start of a measured window.
window_begin() {
	local dir=$1 i
	mkdir -p "$dir"
	W_GW="http://$ENDPOINT_HOST"
	curl -sf -o "$dir/gw.allocs0" "http://127.0.0.1:$PPROF_PORT/debug/pprof/allocs"
	for i in $(seq ${#SHARD_PIDS[@]}); do
		curl -sf -o "$dir/shard-$i.allocs0" "http://127.0.0.1:$((PPROF_PORT + i))/debug/pprof/allocs"
	done
	# NB: the counters last, close together: the window's bytes and CPU
	# are taken over the same span.
	W_IN0=$(metric "$W_GW" regen_s3_bytes_in_total)
	W_OUT0=$(metric "$W_GW" regen_s3_bytes_out_total)
	W_RD0=$(sum_shard_metric regen_shard_reads_total)
	W_WR0=$(sum_shard_metric regen_shard_writes_total)
	W_RQ0=$(shard_requests)
	W_CGW0=$(cpu "$DEV_PID")
	W_CSH0=$(cpu "${SHARD_PIDS[@]}")
	W_CCL0=$(cpu "$BENCH_PID")
	W_T0=$(date +%s.%N)
}

# window_end DIR: the counters' differences since window_begin, into
# DIR/window.env.
window_end() {
	local dir=$1 i t1
	t1=$(date +%s.%N)
	cat >"$dir/window.env" <<-EOV
		secs=$(echo "$t1 - $W_T0" | bc)
		c_gw=$(echo "$(cpu "$DEV_PID") - $W_CGW0" | bc)
		c_sh=$(echo "$(cpu "${SHARD_PIDS[@]}") - $W_CSH0" | bc)
		c_cl=$(echo "$(cpu "$BENCH_PID") - $W_CCL0" | bc)
		bytes=$(($(metric "$W_GW" regen_s3_bytes_in_total) - W_IN0 + $(metric "$W_GW" regen_s3_bytes_out_total) - W_OUT0))
		rd=$(($(sum_shard_metric regen_shard_reads_total) - W_RD0))
		wr=$(($(sum_shard_metric regen_shard_writes_total) - W_WR0))
		rq=$(($(shard_requests) - W_RQ0))
		rss_gw=$(rss_kb "$DEV_PID")
		rss_sh=$(for p in "${SHARD_PIDS[@]}"; do rss_kb "$p"; done | sort -n | tail -1)
		size_bytes=$SIZE_BYTES
	EOV
	curl -sf -o "$dir/gw.allocs1" "http://127.0.0.1:$PPROF_PORT/debug/pprof/allocs"
	for i in $(seq ${#SHARD_PIDS[@]}); do
		curl -sf -o "$dir/shard-$i.allocs1" "http://127.0.0.1:$((PPROF_PORT + i))/debug/pprof/allocs"
	done
}

# capture WORKLOAD: one profiling window while it runs, into $OUT/WORKLOAD.
capture() {
	local phase=$1 dir="$OUT/$1" i
	window_begin "$dir"
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
	window_end "$dir"
}

# snap: the cluster's counters now, one line: CPU seconds of the gateway,
# the shard servers and the client, the time, S3 bytes in and out, shard
# reads, shard writes and all shard-server requests. CPU first: it is what
# a window's boundary must catch at once.
snap() {
	local a m
	printf '%s %s %s %s ' "$(cpu "$DEV_PID")" "$(cpu "${SHARD_PIDS[@]}")" "$(cpu "$BENCH_PID")" "$(date +%s.%N)"
	m=$(curl -sf "http://$ENDPOINT_HOST/metrics")
	awk '$1 == "regen_s3_bytes_in_total" {i = $2} $1 == "regen_s3_bytes_out_total" {o = $2} END {printf "%.0f %.0f ", i, o}' <<<"$m"
	for a in "${SHARD_ADDRS[@]}"; do curl -sf "http://$a/metrics"; done | awk '
		$1 == "regen_shard_reads_total" {rd += $2}
		$1 == "regen_shard_writes_total" {wr += $2}
		$1 ~ /^regen_shardserver_request_duration_seconds_count/ {rq += $2}
		END {printf "%.0f %.0f %.0f\n", rd, wr, rq}'
}

# count_phases: with COUNT, the put and then the get workload measured
# whole, each from its start to its result line. Bytes are told apart by
# direction (PUT in, GET out), so only CPU needs the boundary caught at
# once. No profiles here: a CPU profile needs its length up front.
count_phases() {
	local err="$OUT/bench-$SIZE.err" ph prev cur p1 p2 dir
	prev=$(snap)
	for ph in "put-$SIZE" "get-$SIZE"; do
		dir="$OUT/$ph"
		mkdir -p "$dir"
		perf stat -x, -e raw_syscalls:sys_enter -p "$DEV_PID" -o "$dir/gw.syscalls" 2>/dev/null &
		p1=$!
		perf stat -x, -e raw_syscalls:sys_enter -p "$(IFS=,; echo "${SHARD_PIDS[*]}")" -o "$dir/shards.syscalls" 2>/dev/null &
		p2=$!
		# NB: the result line starts with the workload's name; the start
		# line with a time.
		until grep -q "^$ph " "$err"; do
			kill -0 "$BENCH_PID" 2>/dev/null || break
			sleep 0.02
		done
		cur=$(snap)
		kill -INT "$p1" "$p2" 2>/dev/null || true
		wait "$p1" "$p2" 2>/dev/null || true
		awk -v put="${ph%%-*}" -v rg="$(rss_kb "$DEV_PID")" -v size="$SIZE_BYTES" \
			-v rs="$(for p in "${SHARD_PIDS[@]}"; do rss_kb "$p"; done | sort -n | tail -1)" '
			NR == 1 {split($0, a)} NR == 2 {split($0, b)}
			END {
				printf "secs=%s\nc_gw=%s\nc_sh=%s\nc_cl=%s\n", b[4] - a[4], b[1] - a[1], b[2] - a[2], b[3] - a[3]
				printf "bytes=%.0f\n", put == "put" ? b[5] - a[5] : b[6] - a[6]
				printf "rd=%.0f\nwr=%.0f\nrq=%.0f\n", b[7] - a[7], b[8] - a[8], b[9] - a[9]
				printf "rss_gw=%s\nrss_sh=%s\nsize_bytes=%s\n", rg, rs, size
			}' <(printf '%s\n%s\n' "$prev" "$cur") >"$dir/window.env"
		prev=$cur
	done
}

# summarize DIR: the table row of a captured window.
summarize() {
	local dir=$1 phase secs c_gw c_sh c_cl bytes rd wr rq=0 rss_gw rss_sh size_bytes i r
	phase=$(basename "$dir")
	# shellcheck disable=SC1091
	. "$dir/window.env"
	local objects sc_gw sc_sh a_gw a_sh
	objects=$(echo "scale=2; $bytes / $size_bytes" | bc)
	sc_gw=$(awk -F, '/raw_syscalls/ {print $1}' "$dir/gw.syscalls")
	sc_sh=$(awk -F, '/raw_syscalls/ {print $1}' "$dir/shards.syscalls")
	# Bytes allocated in the window (alloc_space of allocs1 less allocs0).
	a_gw=0 a_sh=0
	[ -f "$dir/gw.allocs1" ] && a_gw=$(go tool pprof -sample_index=alloc_space -raw -base "$dir/gw.allocs0" "$REGEN" "$dir/gw.allocs1" 2>/dev/null | alloc_total)
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
	printf '| %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f | %.1f | %.1f | %.2f | %.2f | %d | %d |\n' \
		"$phase" "$(echo "$bytes / 1000000 / $secs" | bc -l)" \
		"$(echo "$c_gw / $gb" | bc -l)" "$(echo "$c_sh / $gb" | bc -l)" "$(echo "$c_cl / $gb" | bc -l)" \
		"$(echo "($c_gw + $c_sh + $c_cl) / $gb" | bc -l)" \
		"$(echo "${sc_gw:-0} / ($bytes / 1000000)" | bc -l)" "$(echo "${sc_sh:-0} / ($bytes / 1000000)" | bc -l)" \
		"$(echo "($rd + $wr) / $objects" | bc -l)" "$(echo "$rq / $objects" | bc -l)" \
		"$(echo "$a_gw / $bytes" | bc -l)" "$(echo "$a_sh / $bytes" | bc -l)" \
		$((rss_gw / 1024)) $((rss_sh / 1024)) | tee -a "$OUT/table.md"
}

# alloc_total sums the alloc_space samples of `pprof -raw` output.
alloc_total() {
	awk '/^Samples:/ {s=1; next} /^Locations/ {s=0} s && $4 ~ /:$/ {t += $2} END {printf "%.0f\n", t}'
}

{
	echo "| workload | MB/s | gateway CPU s/GB | shards CPU s/GB | client CPU s/GB | total CPU s/GB | gateway syscalls/MB | shard syscalls/MB | shard data requests/object | shard requests/object (all) | gateway alloc B/B | shard alloc B/B | gateway RSS MiB | max shard RSS MiB |"
	echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
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
	# The cluster's own background (gossip, scrubbing, sync) costs CPU
	# whether data moves or not; it is in every window's figures.
	i0=$(cpu "$DEV_PID") s0=$(cpu "${SHARD_PIDS[@]}")
	sleep "${IDLE:-10}"
	printf '%s: idle CPU over %s s: gateway %.3f s/s, shard servers %.3f s/s\n' "$size" "${IDLE:-10}" \
		"$(echo "($(cpu "$DEV_PID") - $i0) / ${IDLE:-10}" | bc -l)" \
		"$(echo "($(cpu "${SHARD_PIDS[@]}") - $s0) / ${IDLE:-10}" | bc -l)" >>"$OUT/idle.txt"
	log "$size: benchmarking"
	bound=(--duration "$DURATION")
	if [ -n "${COUNT:-}" ]; then
		bound=(--duration 0 --count "$COUNT")
	fi
	SIZE=$size
	"$REGEN" bench s3 --json --endpoint "http://$ENDPOINT_HOST" --access $ACCESS --secret $SECRET \
		--workloads put,get --sizes "$size" "${bound[@]}" >"$OUT/bench-$size.jsonl" 2>"$OUT/bench-$size.err" &
	BENCH_PID=$!
	if [ -n "${COUNT:-}" ]; then
		count_phases
	fi
	for phase in "put-$size" "get-$size"; do
		[ -n "${COUNT:-}" ] && break
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
cat "$OUT/idle.txt"
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
