#!/usr/bin/env bash
# bench-vs-minio.sh: the same S3 workloads (`regen bench s3`) against a
# fresh `regen dev` and a fresh MinIO in two set-ups, one system at a time,
# for several alternating rounds; prints the medians and the ratios
# (regen ÷ MinIO) as a markdown table.
#
#   regen        regen dev: one gateway and 12 shard servers, rs-6-3
#   minio-9proc  9 MinIO server processes with one directory each, EC:3:
#                regen's architecture, every shard crosses loopback RPC
#   minio-1proc  one MinIO process with 9 directories, EC:3: what a user
#                would try first on one machine
#   regen-base   regen dev from another regen binary (REGEN_BASE=path), for
#                a before/after comparison of a change in one run:
#                SYSTEMS="regen regen-base" REGEN_BASE=/tmp/regen-old
#
# Environment (all optional):
#   ROUNDS=3                 alternating rounds (the order rotates per round)
#   SYSTEMS="regen minio-9proc minio-1proc"
#   BENCH_ARGS="..."         extra flags for `regen bench s3`, e.g.
#                            "--duration 0 --count 20 --meta-objects 500"
#   SETTLE=10                seconds a fresh system idles before its run
#   OUT=dir                  where results (SYSTEM-rN.jsonl), logs, the
#                            report and the systems' data go (default: a new
#                            directory under ${TMPDIR:-/tmp}; 64 MiB objects
#                            need a few GB free there)
#   MINIO=path               the minio binary (default: on PATH or in
#                            $(go env GOPATH)/bin, else `go install
#                            github.com/minio/minio@latest`)
#   HOST_IP=addr             the address MinIO's distributed set-up uses
#                            (default: the first of `hostname -I`; MinIO
#                            refuses 127.0.0.1 endpoints in a container)
#
# Every system starts on empty directories and is stopped and wiped after
# its run. Nothing else should load the machine while this runs: the
# client, the servers and their disks share it.
set -euo pipefail

cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
SYSTEMS=${SYSTEMS:-"regen minio-9proc minio-1proc"}
BENCH_ARGS=${BENCH_ARGS:-}
SETTLE=${SETTLE:-10}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/bench-vs-minio-XXXXXX")}
ACCESS=benchadmin
SECRET=benchadmin-secret-key
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

REGEN="$OUT/regen"
log "building regen into $REGEN"
go build -o "$REGEN" ./cmd/regen

if [ -z "${MINIO:-}" ]; then
	MINIO=$(command -v minio || true)
	[ -n "$MINIO" ] || MINIO="$(go env GOPATH)/bin/minio"
	if [ ! -x "$MINIO" ]; then
		log "installing MinIO (go install github.com/minio/minio@latest; takes minutes)"
		go install github.com/minio/minio@latest
	fi
fi
HOST_IP=${HOST_IP:-$(hostname -I | awk '{print $1}')}
[ -n "$HOST_IP" ] || { echo "no host IP (set HOST_IP)" >&2; exit 1; }

# free_port prints a TCP port nobody listens on.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000))
}

PIDS=()
stop_all() {
	local p
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && kill "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] || continue
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
	PIDS=()
}
trap stop_all EXIT INT TERM

# wait_http URL SECONDS: until URL answers 2xx.
wait_http() {
	local i
	for i in $(seq $(($2 * 5))); do
		curl -sf -o /dev/null "$1" && return 0
		sleep 0.2
	done
	echo "timed out waiting for $1" >&2
	return 1
}

# start_regen DIR [BINARY]: a fresh regen dev; sets ENDPOINT.
start_regen() {
	local dir=$1 bin=${2:-$REGEN} port
	port=$(free_port)
	REGEN_ACCESS_KEY=$ACCESS REGEN_SECRET_KEY=$SECRET "$bin" dev --data "$dir" --addr "127.0.0.1:$port" >"$dir.log" 2>&1 &
	PIDS+=($!)
	ENDPOINT="http://127.0.0.1:$port"
	wait_http "$ENDPOINT/readyz" 120
	# Every shard server alive in the gateway's view, not just a quorum.
	local i alive
	for i in $(seq 300); do
		alive=$("$REGEN" admin status --json --endpoint "$ENDPOINT" --access-key $ACCESS --secret-key $SECRET 2>/dev/null |
			jq '[.nodes[] | select(.r == "shard" and .state == "alive")] | length' 2>/dev/null || echo 0)
		[ "$alive" = 12 ] && return 0
		sleep 0.2
	done
	echo "regen dev: only $alive shard servers alive" >&2
	return 1
}

# NB: exec, so that a caller's $! is MinIO's PID and stop_all stops it
# (a backgrounded function is a subshell, which would otherwise be what
# gets killed, leaving MinIO running).
minio_env() {
	exec env MINIO_ROOT_USER=$ACCESS MINIO_ROOT_PASSWORD=$SECRET MINIO_STORAGE_CLASS_STANDARD=EC:3 MINIO_CI_CD=1 \
		MINIO_BROWSER=off MINIO_UPDATE=off "$@"
}

# start_minio1 DIR: one MinIO process, 9 directories; sets ENDPOINT.
start_minio1() {
	local dir=$1 port
	port=$(free_port)
	mkdir -p "$dir"/d{1..9}
	minio_env "$MINIO" server --quiet --address "127.0.0.1:$port" --console-address "127.0.0.1:$(free_port)" \
		"$dir/d{1...9}" >"$dir.log" 2>&1 &
	PIDS+=($!)
	ENDPOINT="http://127.0.0.1:$port"
	wait_http "$ENDPOINT/minio/health/cluster" 120
}

# start_minio9 DIR: 9 MinIO processes, one directory each, one erasure
# set of 9 drives on the machine's own IP; sets ENDPOINT.
start_minio9() {
	local dir=$1 i ports=() eps=()
	for i in $(seq 9); do
		ports+=($(free_port))
		mkdir -p "$dir/d$i"
		eps+=("http://$HOST_IP:${ports[$((i - 1))]}$dir/d$i")
	done
	for i in $(seq 9); do
		minio_env "$MINIO" server --quiet --address "$HOST_IP:${ports[$((i - 1))]}" \
			--console-address "$HOST_IP:$(free_port)" "${eps[@]}" >"$dir.$i.log" 2>&1 &
		PIDS+=($!)
	done
	ENDPOINT="http://$HOST_IP:${ports[0]}"
	wait_http "$ENDPOINT/minio/health/cluster" 180
}

run_one() {
	local sys=$1 round=$2 dir="$OUT/data-$1"
	rm -rf "$dir" "$dir".*
	mkdir -p "$dir"
	log "round $round: $sys: starting"
	case $sys in
	regen) start_regen "$dir" ;;
	regen-base) start_regen "$dir" "${REGEN_BASE:?regen-base needs REGEN_BASE=path of the other binary}" ;;
	minio-1proc) start_minio1 "$dir" ;;
	minio-9proc) start_minio9 "$dir" ;;
	*) echo "unknown system $sys" >&2; exit 2 ;;
	esac
	sleep "$SETTLE"
	log "round $round: $sys: benchmarking $ENDPOINT"
	# shellcheck disable=SC2086
	if ! "$REGEN" bench s3 --json --endpoint "$ENDPOINT" --access $ACCESS --secret $SECRET $BENCH_ARGS \
		>"$OUT/$sys-r$round.jsonl" 2>"$OUT/$sys-r$round.err"; then
		log "round $round: $sys: the bench reported errors (see $OUT/$sys-r$round.err); its figures are kept"
	fi
	stop_all
	rm -rf "$dir"
}

read -r -a systems <<<"$SYSTEMS"
for round in $(seq "$ROUNDS"); do
	n=${#systems[@]}
	for j in $(seq 0 $((n - 1))); do
		run_one "${systems[$(((j + round - 1) % n))]}" "$round"
	done
done

{
	echo "## regen vs MinIO, $(date -u +%Y-%m-%d) ($ROUNDS rounds)"
	echo
	echo "Host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average before the run: $LOAD0, after: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "bench args: ${BENCH_ARGS:-defaults}"
	echo
	"$REGEN" bench s3-report --systems "$(echo "$SYSTEMS" | tr ' ' ,)" "$OUT"
} | tee "$OUT/report.md"
log "results, logs and report.md in $OUT"
