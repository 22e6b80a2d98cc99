#!/usr/bin/env bash
# scale-run.sh: issue 18's scale run. A fresh `regen dev` is loaded with
# OBJECTS objects of 1 KiB in 1,000 prefixes through the S3 API (`regen
# bench fill`), then:
#
#   1. idle CPU of the whole cluster (gateway and shard servers, from
#      /proc) over IDLE seconds after SETTLE seconds with nothing changing,
#      and the RSS of every process;
#   2. HEAD, a full recursive listing, a delimiter listing and
#      DeleteObjects of 10,000 keys (`regen bench probe`);
#   3. one shard server killed and started again on the same data after
#      DOWN seconds: the time until every server's manifest sync has
#      answered the return (admin status: sync pending on no server);
#   4. one shard server killed for good: the time until the others call
#      it dead, and until no stripe is degraded any more (repair done),
#      with the bytes it held.
#
# Environment (all optional):
#   OBJECTS=1000000  PREFIXES=1000  SIZE=1KiB  CONCURRENCY=32
#   DELETE=10000     objects the probe removes by DeleteObjects
#   PROBE=1          0: skip the HEAD, listing and DeleteObjects probe (a
#                    run that measures the idle cluster and the repair)
#   STRIPED=200 STRIPED_SIZE=1MiB  objects above the inline limit (128 KiB)
#                    in a second bucket, so the killed server held shards to
#                    rebuild: 1 KiB objects live inside their manifests,
#                    which every server of the placement holds whole.
#                    Run twice with different STRIPED to see repair time
#                    against data held.
#   SETTLE=120 IDLE=60 DOWN=20   seconds
#   FILL_START=N     resume a stopped fill phase at object N (what a
#                    stopped `regen bench fill` printed) on OUT's data
#   DEV_ARGS="..."   extra flags for regen dev (its repair grace is 5 s)
#   OUT=dir          data, logs and results (default: a new dir under /tmp;
#                    a million objects need a few GB)
#   KEEP=1           leave the cluster running at the end (Ctrl-C stops it)
#   PHASE=all        or fill: load the objects and stop the cluster; or
#                    measure: start a cluster on OUT's data left by a fill
#                    phase (with the binary built now) and measure. A fill
#                    of a million objects takes about an hour; splitting
#                    lets a new build be measured on the same data.
#
# It prints a markdown table and writes results.json to OUT. Nothing else
# should load the machine while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
OBJECTS=${OBJECTS:-1000000}
PREFIXES=${PREFIXES:-1000}
SIZE=${SIZE:-1KiB}
STRIPED=${STRIPED:-200}
STRIPED_SIZE=${STRIPED_SIZE:-1MiB}
CONCURRENCY=${CONCURRENCY:-32}
DELETE=${DELETE:-10000}
PROBE=${PROBE:-1}
[ "$DELETE" -le "$OBJECTS" ] || DELETE=$((OBJECTS / 10))
SETTLE=${SETTLE:-120}
IDLE=${IDLE:-60}
DOWN=${DOWN:-20}
DEV_ARGS=${DEV_ARGS:-}
PHASE=${PHASE:-all}
FILL_START=${FILL_START:-0}
case $PHASE in all|fill|measure) ;; *) echo "PHASE=$PHASE: want all, fill or measure" >&2; exit 2;; esac
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/scale-run-XXXXXX")}
ACCESS=scaleadmin
SECRET=scaleadmin-secret-key
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DATA="$OUT/data"
CLK=$(getconf CLK_TCK)

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
now() { date +%s.%N; }
since() { printf '%.1f' "$(echo "$(now) - $1" | bc)"; }

REGEN="$OUT/regen"
log "building regen into $REGEN"
# NB: without cgo, as the image is built (scripts/build-image.sh): pebble's
# block cache and memtables are then Go memory, under the shard servers'
# --memory-limit, instead of glibc arenas beside it (with cgo, ~150 MiB of
# arenas per server during a million-object repair).
CGO_ENABLED=0 go build -o "$REGEN" ./cmd/regen

DEV_PID=
EXTRA_PIDS=()
stop_all() {
	[ -n "${KEEP:-}" ] && return
	local p
	for p in $DEV_PID "${EXTRA_PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	for p in $DEV_PID "${EXTRA_PIDS[@]:-}"; do
		[ -n "$p" ] || continue
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
}
trap stop_all EXIT INT TERM

admin() { "$REGEN" admin "$@" --endpoint "$ENDPOINT" --access-key $ACCESS --secret-key $SECRET; }
status() { admin status --json 2>/dev/null; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1]); s.close()')
ENDPOINT="http://127.0.0.1:$port"
mkdir -p "$DATA"
if [ "$FILL_START" -gt 0 ]; then
	rm -f "$DATA/dev.json"
fi
if [ "$PHASE" = measure ]; then
	[ -s "$OUT/fill.json" ] || { echo "PHASE=measure: no fill.json in $OUT (run PHASE=fill first)" >&2; exit 2; }
	rm -f "$DATA/dev.json"
fi
log "starting regen dev on $ENDPOINT ($DATA)"
# shellcheck disable=SC2086
REGEN_ACCESS_KEY=$ACCESS REGEN_SECRET_KEY=$SECRET "$REGEN" dev --data "$DATA" --addr "127.0.0.1:$port" $DEV_ARGS >"$OUT/dev.log" 2>&1 &
DEV_PID=$!
for _ in $(seq 600); do [ -s "$DATA/dev.json" ] && curl -sf -o /dev/null "$ENDPOINT/readyz" && break; sleep 0.2; done
SHARDS=$(jq '.shards | length' "$DATA/dev.json")
for _ in $(seq 300); do
	alive=$(status | jq '[.nodes[] | select(.r == "shard" and .state == "alive")] | length' || echo 0)
	[ "$alive" = "$SHARDS" ] && break
	sleep 0.2
done
log "cluster up: $SHARDS shard servers"

pids() { jq -r '.gateways[].pid, .shards[].pid' "$DATA/dev.json"; }
# cpu_ticks: utime+stime of every process of the cluster, in clock ticks.
cpu_ticks() {
	local p t=0 v
	for p in $(pids); do
		v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
		t=$((t + v))
	done
	echo $t
}
# mem_kib FIELD PID: a memory figure of /proc/PID/status in KiB (VmRSS:
# resident now; VmHWM: the peak since the process started).
mem_kib() { awk -v f="$1:" '$1 == f {print $2}' "/proc/$2/status" 2>/dev/null || echo 0; }
# sorted_kib FIELD PID...: mem_kib of each, ascending, on one line.
sorted_kib() { local f=$1; shift; for p in "$@"; do mem_kib "$f" "$p"; done | sort -n | tr '\n' ' '; }

if [ "$PHASE" != measure ]; then
	log "filling: $OBJECTS objects of $SIZE in $PREFIXES prefixes"
	t0=$(now)
	"$REGEN" bench fill --endpoint "$ENDPOINT" --access $ACCESS --secret $SECRET --bucket scale \
		--start "$FILL_START" --objects $((OBJECTS - FILL_START)) --prefixes "$PREFIXES" --size "$SIZE" --concurrency "$CONCURRENCY" --json >"$OUT/fill.json"
	fill_s=$(since "$t0")
	echo "$fill_s" >"$OUT/fill_s"
	log "filled in ${fill_s%.*} s: $(cat "$OUT/fill.json")"
	if [ "$STRIPED" -gt 0 ]; then
		log "filling: $STRIPED objects of $STRIPED_SIZE (erasure-coded) in bucket striped"
		"$REGEN" bench fill --endpoint "$ENDPOINT" --access $ACCESS --secret $SECRET --bucket striped \
			--objects "$STRIPED" --prefixes 10 --size "$STRIPED_SIZE" --concurrency 8 --quiet --json >"$OUT/fill-striped.json"
	fi
else
	fill_s=$(cat "$OUT/fill_s" 2>/dev/null || echo 0)
	log "measuring the data of an earlier fill phase: $(cat "$OUT/fill.json")"
	# NB: the striped objects are what that fill wrote, not this run's
	# STRIPED (the results name them).
	STRIPED=0
	[ ! -s "$OUT/fill-striped.json" ] || STRIPED=$(jq -r .objects "$OUT/fill-striped.json")
fi
if [ "$PHASE" = fill ]; then
	log "fill phase done; measure with PHASE=measure OUT=$OUT"
	exit 0
fi

log "settling ${SETTLE}s, then measuring idle CPU over ${IDLE}s"
sleep "$SETTLE"
c0=$(cpu_ticks)
sleep "$IDLE"
c1=$(cpu_ticks)
idle_pct=$(echo "scale=2; 100 * ($c1 - $c0) / $CLK / $IDLE" | bc)
gw_rss=$(mem_kib VmRSS "$(jq -r '.gateways[0].pid' "$DATA/dev.json")")
shard_rss=$(sorted_kib VmRSS $(jq -r '.shards[].pid' "$DATA/dev.json"))
log "idle CPU ${idle_pct}% of one core; RSS gateway ${gw_rss} KiB, shard servers (KiB, sorted): $shard_rss"

if [ "$PROBE" = 1 ]; then
	log "probing HEAD, listings and DeleteObjects"
	"$REGEN" bench probe --endpoint "$ENDPOINT" --access $ACCESS --secret $SECRET --bucket scale \
		--objects "$OBJECTS" --prefixes "$PREFIXES" --size "$SIZE" --delete "$DELETE" --json >"$OUT/probe.jsonl"
else
	log "PROBE=0: no HEAD, listing or DeleteObjects probe"
	: >"$OUT/probe.jsonl"
fi

# sync_pending: how many shard servers report a manifest sync asked for
# and not yet done (-1 while the restarted one is not live yet).
sync_pending() {
	status | jq --arg id "$1" 'if ([.nodes[] | select(.id == $id and .state == "alive")] | length) == 0 then -1 else .repair.sync_pending end'
}

log "restart: shard server 1 killed, started again after ${DOWN}s"
victim_pid=$(jq -r '.shards[0].pid' "$DATA/dev.json")
mapfile -d '' -t cmdline <"/proc/$victim_pid/cmdline"
# NB: started again with the environment dev gave it (GOMAXPROCS
# included): with this script's own, the restarted server ran with two Ps
# where dev's run with one, and behaved unlike the others in the repair.
mapfile -d '' -t environ <"/proc/$victim_pid/environ"
kill -9 "$victim_pid"
sleep "$DOWN"
t0=$(now)
env -i "${environ[@]}" "${cmdline[@]}" >>"$(jq -r '.shards[0].data' "$DATA/dev.json")/shard.log" 2>&1 &
restarted=$!
EXTRA_PIDS+=($restarted)
victim_id=$(jq -r '.shards[0].id' "$DATA/dev.json")
# Back in sync: the restarted server is live, and no server has a sync
# pending, the restarted one's own at start included. A gossip flap asks
# for syncs too, so this can only be longer than the true time.
sleep 1
for _ in $(seq 3600); do
	kill -0 "$restarted" 2>/dev/null || { log "the restarted shard server exited: see its shard.log"; exit 1; }
	[ "$(sync_pending "$victim_id")" = 0 ] && break
	sleep 0.5
done
resync_s=$(since "$t0")
log "back in sync ${resync_s} s after the restart"

log "kill: shard server 2 killed for good"
victim=$(jq -r '.shards[1].id' "$DATA/dev.json")
held=$(status | jq --arg id "$victim" '[.nodes[] | select(.id == $id) | .stats.bytes // 0] | add')
held_shards=$(status | jq --arg id "$victim" '[.nodes[] | select(.id == $id) | .stats.shards // 0] | add')
kill -9 "$(jq -r '.shards[1].pid' "$DATA/dev.json")"
t0=$(now)
for _ in $(seq 600); do
	[ "$(status | jq --arg id "$victim" '[.nodes[] | select(.id == $id and .state == "dead")] | length')" = 1 ] && break
	sleep 0.2
done
detect_s=$(since "$t0")
# Repaired: what `regen admin repair watch` waits for (nothing degraded,
# queued or running, and the dead server counted by every repair worker).
admin repair watch --json >"$OUT/repair-watch.jsonl"
repair_s=$(since "$t0")
log "dead after ${detect_s} s, repaired after ${repair_s} s ($held bytes, $held_shards shard files held)"
# Peak RSS of the shard servers that lived through the whole measure
# phase (started on the filled data, then the restart, the probe and the
# repair), and of the restarted one since its restart.
peak_rss=$(sorted_kib VmHWM $(jq -r '.shards[2:][].pid' "$DATA/dev.json") "$restarted")
log "peak RSS of the shard servers (KiB, sorted): $peak_rss"

jq -n --argjson objects "$OBJECTS" --arg fill "$fill_s" --arg idle "$idle_pct" --argjson gw "$gw_rss" \
	--arg shards "$shard_rss" --arg resync "$resync_s" --arg detect "$detect_s" --arg repair "$repair_s" \
	--argjson held "${held:-0}" --slurpfile probe "$OUT/probe.jsonl" --arg peak "$peak_rss" \
	'{objects: $objects, fill_s: ($fill|tonumber), idle_cpu_pct: ($idle|tonumber), gateway_rss_kib: $gw,
	  shard_rss_kib: ($shards|split(" ")|map(select(. != ""))|map(tonumber)), probe: $probe,
	  resync_s: ($resync|tonumber), detect_s: ($detect|tonumber), repair_s: ($repair|tonumber), bytes_held: $held,
	  shard_peak_rss_kib: ($peak|split(" ")|map(select(. != ""))|map(tonumber))}' >"$OUT/results.json"

{
	echo "## scale run: $OBJECTS objects of $SIZE in $PREFIXES prefixes, $(date -u +%Y-%m-%d)"
	echo
	echo "Host: $(nproc) cores; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo "| measure | value |"
	echo "| --- | --- |"
	echo "| fill (S3 PUTs, concurrency $CONCURRENCY) | ${fill_s%.*} s ($(jq -r '.objects' "$OUT/fill.json") objects, $(jq -r '.errors' "$OUT/fill.json") errors) |"
	echo "| idle CPU, whole cluster (${IDLE} s after ${SETTLE} s) | ${idle_pct}% of one core |"
	echo "| RSS gateway | $((gw_rss / 1024)) MiB |"
	echo "| RSS shard servers (min / max) | $(($(echo $shard_rss | awk '{print $1}') / 1024)) / $(($(echo $shard_rss | awk '{print $NF}') / 1024)) MiB |"
	jq -r '"| \(.workload) | \(if .workload == "head" then "\(.ops_per_s) ops/s (p50 \(.p50_ms) ms)" elif .workload == "delete-objects" then "\(.items_per_s) keys/s" elif .workload == "list-recursive" then "\(.items_per_s) objects/s (\(.p50_ms / 1000) s per listing)" else "\(.p50_ms) ms (p50)" end); \(.errors) errors |"' "$OUT/probe.jsonl"
	echo "| restarted server back in sync (down ${DOWN} s) | ${resync_s} s |"
	echo "| killed server called dead | ${detect_s} s |"
	echo "| peak RSS shard servers over the measure phase, repair included (min / max) | $(($(echo $peak_rss | awk '{print $1}') / 1024)) / $(($(echo $peak_rss | awk '{print $NF}') / 1024)) MiB |"
	echo "| killed server fully repaired (it held $held bytes in $held_shards shard files; $STRIPED objects of $STRIPED_SIZE) | ${repair_s} s |"
} | tee "$OUT/report.md"
log "results in $OUT"
