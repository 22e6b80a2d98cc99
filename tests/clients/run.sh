#!/usr/bin/env bash
# Runs real S3 clients against a fresh `regen dev` on 127.0.0.1 and checks
# that what they upload comes back byte-identical.
#
#   tests/clients/run.sh            # every client found on PATH
#   CLIENTS="aws mc" tests/clients/run.sh
#
# Clients: aws (CLI), rclone, s3cmd, boto3 (python3), mc, restic (into a
# versioned bucket, which it makes with the aws CLI), and the Go SDKs
# (minio-go, aws-sdk-go-v2) through `go test` (skip with SKIP_GO_TESTS=1,
# e.g. when `go test ./...` already ran them). A client that is not
# installed FAILS unless ALLOW_MISSING=1: CI must not pass by skipping.
# BIG_MB sets the size of the aws CLI multipart file (default 1024).
#
# Exit status: 0 when every scenario passed, 1 otherwise. Every run prints
# one PASS/FAIL line per scenario and a summary.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLIENTS=${CLIENTS:-"aws rclone s3cmd boto3 mc restic go"}
BIG_MB=${BIG_MB:-1024}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/regen-clients.XXXXXX")
DEV_PID=""
FAILED=()
PASSED=()
SKIPPED=()

cleanup() {
	if [ -n "$DEV_PID" ] && kill -0 "$DEV_PID" 2>/dev/null; then
		kill -TERM "$DEV_PID"
		for _ in $(seq 50); do kill -0 "$DEV_PID" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$DEV_PID" 2>/dev/null
	fi
	if [ "${KEEP_WORK:-0}" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '%s\n' "$*" >&2; }

# scenario NAME CMD...: runs CMD with its output in a log; prints PASS or
# FAIL (with the log's tail).
scenario() {
	local name=$1; shift
	local out="$WORK/logs/$name.log"
	local start=$SECONDS
	# NB: not in an if/||: errexit (set -e) inside the scenario's subshell
	# would be ignored there.
	"$@" >"$out" 2>&1
	if [ $? -eq 0 ]; then
		log "PASS  $name ($((SECONDS - start))s)"
		PASSED+=("$name")
	else
		log "FAIL  $name ($((SECONDS - start))s); last lines of its log:"
		tail -25 "$out" | sed 's/^/      /' >&2
		FAILED+=("$name")
	fi
}

have() { command -v "$1" >/dev/null 2>&1; }

missing() {
	if [ "${ALLOW_MISSING:-0}" = 1 ]; then
		log "SKIP  $1 (not installed)"
		SKIPPED+=("$1")
	else
		log "FAIL  $1: not installed"
		FAILED+=("$1")
	fi
}

# ---- the cluster ----------------------------------------------------------

mkdir -p "$WORK/logs" "$WORK/bin"
log "building regen"
(cd "$ROOT" && go build -o "$WORK/bin/regen" ./cmd/regen) || exit 1
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export REGEN_ACCESS_KEY=clientkey REGEN_SECRET_KEY=client-secret-key
"$WORK/bin/regen" dev --data "$WORK/data" --addr "127.0.0.1:$PORT" >"$WORK/logs/dev.log" 2>&1 &
DEV_PID=$!
for _ in $(seq 300); do
	[ -f "$WORK/data/dev.json" ] && break
	kill -0 "$DEV_PID" 2>/dev/null || { cat "$WORK/logs/dev.log"; exit 1; }
	sleep 0.2
done
[ -f "$WORK/data/dev.json" ] || { log "regen dev did not start"; cat "$WORK/logs/dev.log"; exit 1; }
ENDPOINT="http://127.0.0.1:$PORT"
log "regen dev up at $ENDPOINT (pid $DEV_PID)"

# Traffic goes to 127.0.0.1 only; a CA bundle from the environment
# confuses some clients (rclone refuses plain-HTTP endpoints with one).
unset AWS_CA_BUNDLE
export AWS_ACCESS_KEY_ID=$REGEN_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$REGEN_SECRET_KEY AWS_DEFAULT_REGION=us-east-1
export AWS_CONFIG_FILE="$WORK/aws-config" AWS_SHARED_CREDENTIALS_FILE=/dev/null
cat >"$AWS_CONFIG_FILE" <<EOF
[default]
region = us-east-1
s3 =
    signature_version = s3v4
    multipart_threshold = 16MB
    multipart_chunksize = 16MB
EOF

# ---- test data ------------------------------------------------------------

log "making test data"
python3 - "$WORK" <<'EOF'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(6)
for i in range(1000):
    d = os.path.join(root, "tree", "d%02d" % (i % 20), "sub%d" % (i % 3))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "file %04d+x.bin" % i), "wb") as f:
        f.write(rnd.randbytes(rnd.choice([0, 1, 100, 4096, 20000])))
with open(os.path.join(root, "mid.bin"), "wb") as f:
    f.write(rnd.randbytes(40 << 20))
EOF
head -c "$((BIG_MB << 20))" /dev/urandom >"$WORK/big.bin"

same() { cmp "$1" "$2" && echo "identical: $2"; }
same_tree() { diff -r "$1" "$2" && echo "identical trees: $1 $2"; }

# ---- aws CLI ----------------------------------------------------------------

aws_scenario() (
	set -ex
	local a=(aws --endpoint-url "$ENDPOINT")
	"${a[@]}" s3 mb s3://aws-cli
	"${a[@]}" s3 ls | grep aws-cli
	"${a[@]}" s3 cp --only-show-errors "$WORK/big.bin" s3://aws-cli/big.bin
	"${a[@]}" s3api head-object --bucket aws-cli --key big.bin | grep -E '"ETag": ".*-[0-9]+\\""'
	"${a[@]}" s3 cp --only-show-errors s3://aws-cli/big.bin "$WORK/aws-big.out"
	same "$WORK/big.bin" "$WORK/aws-big.out"
	rm -f "$WORK/aws-big.out"
	# One PUT with a whole-object checksum, read back in ranged parts: the
	# CLI checks any checksum a ranged GET returns against its part.
	"${a[@]}" s3api put-object --bucket aws-cli --key mid.bin --body "$WORK/mid.bin" --checksum-algorithm CRC32 >/dev/null
	"${a[@]}" s3 cp --only-show-errors s3://aws-cli/mid.bin "$WORK/aws-mid.out"
	same "$WORK/mid.bin" "$WORK/aws-mid.out"
	rm -f "$WORK/aws-mid.out"
	"${a[@]}" s3 cp --only-show-errors s3://aws-cli/big.bin s3://aws-cli/copy/big.bin
	"${a[@]}" s3api head-object --bucket aws-cli --key copy/big.bin | grep "\"ContentLength\": $((BIG_MB << 20))"
	"${a[@]}" s3 sync --only-show-errors "$WORK/tree" s3://aws-cli/tree
	test "$("${a[@]}" s3 ls --recursive s3://aws-cli/tree/ | wc -l)" -eq 1000
	"${a[@]}" s3 sync --only-show-errors s3://aws-cli/tree "$WORK/aws-tree"
	same_tree "$WORK/tree" "$WORK/aws-tree"
	url=$(aws --endpoint-url "$ENDPOINT" s3 presign s3://aws-cli/tree/d01/sub1/file\ 0001+x.bin --expires-in 300)
	curl -sf -o "$WORK/aws-presigned.out" "$url"
	same "$WORK/tree/d01/sub1/file 0001+x.bin" "$WORK/aws-presigned.out"
	"${a[@]}" s3 rm --only-show-errors --recursive s3://aws-cli/
	test -z "$("${a[@]}" s3 ls --recursive s3://aws-cli/)"
	"${a[@]}" s3 rb s3://aws-cli
)

# ---- rclone -----------------------------------------------------------------

rclone_scenario() (
	set -ex
	export RCLONE_CONFIG="$WORK/rclone.conf"
	cat >"$RCLONE_CONFIG" <<EOF
[regen]
type = s3
provider = Other
endpoint = $ENDPOINT
access_key_id = $AWS_ACCESS_KEY_ID
secret_access_key = $AWS_SECRET_ACCESS_KEY
region = us-east-1
force_path_style = true
EOF
	local r=(rclone --retries 1 --low-level-retries 2 --s3-upload-cutoff 8M --s3-chunk-size 8M)
	"${r[@]}" mkdir regen:rclone
	"${r[@]}" copyto "$WORK/mid.bin" regen:rclone/mid.bin
	"${r[@]}" copyto regen:rclone/mid.bin "$WORK/rclone-mid.out"
	same "$WORK/mid.bin" "$WORK/rclone-mid.out"
	"${r[@]}" copyto regen:rclone/mid.bin regen:rclone/mid-copy.bin
	"${r[@]}" sync "$WORK/tree" regen:rclone/tree
	"${r[@]}" check "$WORK/tree" regen:rclone/tree
	"${r[@]}" sync regen:rclone/tree "$WORK/rclone-tree"
	same_tree "$WORK/tree" "$WORK/rclone-tree"
	test "$("${r[@]}" ls regen:rclone/tree | wc -l)" -eq 1000
	"${r[@]}" purge regen:rclone
	# --s3-versions in a versioned bucket (made with the aws CLI, which
	# rclone 1.60 cannot do): the overwritten version is listed beside
	# the current one, under a name with its time, and reads back.
	aws --endpoint-url "$ENDPOINT" s3api create-bucket --bucket rclone-versions
	aws --endpoint-url "$ENDPOINT" s3api put-bucket-versioning --bucket rclone-versions --versioning-configuration Status=Enabled
	echo "first version" >"$WORK/v.txt"
	"${r[@]}" copyto "$WORK/v.txt" regen:rclone-versions/doc.txt
	echo "second version" >"$WORK/v.txt"
	"${r[@]}" copyto "$WORK/v.txt" regen:rclone-versions/doc.txt
	"${r[@]}" lsf --s3-versions regen:rclone-versions | tee "$WORK/rclone-versions.txt"
	test "$(wc -l <"$WORK/rclone-versions.txt")" -eq 2
	grep -qx 'doc-v[0-9-]*\.txt' "$WORK/rclone-versions.txt"
	"${r[@]}" copy --s3-versions regen:rclone-versions "$WORK/rclone-versions"
	grep -qx "first version" "$WORK"/rclone-versions/doc-v*.txt
	grep -qx "second version" "$WORK/rclone-versions/doc.txt"
)

# ---- s3cmd ------------------------------------------------------------------

s3cmd_scenario() (
	set -ex
	cat >"$WORK/s3cfg" <<EOF
[default]
access_key = $AWS_ACCESS_KEY_ID
secret_key = $AWS_SECRET_ACCESS_KEY
host_base = 127.0.0.1:$PORT
host_bucket = 127.0.0.1:$PORT
use_https = False
signature_v2 = False
bucket_location = us-east-1
EOF
	local s=(s3cmd -c "$WORK/s3cfg" --no-progress)
	"${s[@]}" mb s3://s3cmd
	"${s[@]}" put --multipart-chunk-size-mb=5 "$WORK/mid.bin" s3://s3cmd/mid.bin
	"${s[@]}" get s3://s3cmd/mid.bin "$WORK/s3cmd-mid.out"
	same "$WORK/mid.bin" "$WORK/s3cmd-mid.out"
	"${s[@]}" cp s3://s3cmd/mid.bin s3://s3cmd/mid-copy.bin
	"${s[@]}" sync "$WORK/tree/" s3://s3cmd/tree/
	"${s[@]}" sync s3://s3cmd/tree/ "$WORK/s3cmd-tree/"
	same_tree "$WORK/tree" "$WORK/s3cmd-tree"
	test "$("${s[@]}" ls --recursive s3://s3cmd/tree/ | wc -l)" -eq 1000
	"${s[@]}" del --recursive --force s3://s3cmd/
	"${s[@]}" rb s3://s3cmd
)

# ---- boto3 ------------------------------------------------------------------

boto3_scenario() {
	python3 "$ROOT/tests/clients/boto3_scenario.py" "$ENDPOINT" "$WORK"
}

# ---- mc ---------------------------------------------------------------------

mc_scenario() (
	set -ex
	export MC_CONFIG_DIR="$WORK/mc"
	local m=(mc --quiet --no-color)
	"${m[@]}" alias set regen "$ENDPOINT" "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" --api S3v4 --path on
	"${m[@]}" mb regen/mc-bucket
	"${m[@]}" cp "$WORK/mid.bin" regen/mc-bucket/mid.bin
	"${m[@]}" stat regen/mc-bucket/mid.bin | grep -E 'ETag.*-[0-9]+'
	"${m[@]}" cp regen/mc-bucket/mid.bin "$WORK/mc-mid.out"
	same "$WORK/mid.bin" "$WORK/mc-mid.out"
	"${m[@]}" cp regen/mc-bucket/mid.bin regen/mc-bucket/mid-copy.bin
	"${m[@]}" mirror "$WORK/tree" regen/mc-bucket/tree
	"${m[@]}" mirror regen/mc-bucket/tree "$WORK/mc-tree"
	same_tree "$WORK/tree" "$WORK/mc-tree"
	test "$("${m[@]}" ls --recursive regen/mc-bucket/tree | wc -l)" -eq 1000
	url=$("${m[@]}" share download --json regen/mc-bucket/mid.bin | python3 -c 'import json,sys; print(json.load(sys.stdin)["share"])')
	curl -sf -o "$WORK/mc-presigned.out" "$url"
	same "$WORK/mid.bin" "$WORK/mc-presigned.out"
	"${m[@]}" rm --recursive --force regen/mc-bucket
	"${m[@]}" rb regen/mc-bucket
)

# ---- Go SDKs ----------------------------------------------------------------

# ---- restic -----------------------------------------------------------------

# A backup repository in a versioned bucket, as restic's users set one up
# for protection against deletion: backup, a second backup after changes,
# check reading every pack, a restore of the first snapshot compared with
# its source, forget and prune (which deletes objects: they leave delete
# markers over noncurrent versions), check again, and a restore of the
# snapshot left.
restic_scenario() (
	set -ex
	export RESTIC_PASSWORD=regen-clients-test RESTIC_REPOSITORY="s3:$ENDPOINT/restic/repo"
	aws --endpoint-url "$ENDPOINT" s3api create-bucket --bucket restic
	aws --endpoint-url "$ENDPOINT" s3api put-bucket-versioning --bucket restic --versioning-configuration Status=Enabled
	mkdir -p "$WORK/restic-src"
	cp -r "$WORK/tree/d00" "$WORK/tree/d01" "$WORK/mid.bin" "$WORK/restic-src/"
	restic init
	restic backup --quiet "$WORK/restic-src"
	first=$(restic snapshots --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["short_id"])')
	cp -r "$WORK/restic-src" "$WORK/restic-first"
	rm -rf "$WORK/restic-src/d01" "$WORK/restic-src/mid.bin"
	echo "changed" >"$WORK/restic-src/new.txt"
	restic backup --quiet "$WORK/restic-src"
	restic check --read-data
	restic restore "$first" --target "$WORK/restic-out1"
	same_tree "$WORK/restic-first" "$WORK/restic-out1$WORK/restic-src"
	restic forget --keep-last 1 --prune
	test "$(restic snapshots --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" -eq 1
	restic check --read-data
	# The pruned packs are noncurrent versions now, not gone.
	aws --endpoint-url "$ENDPOINT" s3api list-object-versions --bucket restic --prefix repo/data/ \
		--query 'length(DeleteMarkers)' | grep -qv '^0$'
	restic restore latest --target "$WORK/restic-out"
	same_tree "$WORK/restic-src" "$WORK/restic-out$WORK/restic-src"
)

go_scenario() {
	cd "$ROOT" && go test ./tests/ -count=1 -run 'TestS3Surface|TestAWSSDKGoV2' -v
}

# client NAME PROBE...: runs NAME's scenario if PROBE succeeds.
client() {
	local name=$1; shift
	if "$@" >/dev/null 2>&1; then
		scenario "$name" "${name//-/_}_scenario"
	else
		missing "$name"
	fi
}

export PATH="$PATH:$(go env GOPATH)/bin"
for c in $CLIENTS; do
	case $c in
	aws) client aws have aws ;;
	rclone) client rclone have rclone ;;
	s3cmd) client s3cmd have s3cmd ;;
	boto3) client boto3 python3 -c 'import boto3' ;;
	mc) client mc have mc ;;
	restic) client restic have restic ;;
	go)
		if [ "${SKIP_GO_TESTS:-0}" = 1 ]; then
			log "SKIP  go SDK tests (SKIP_GO_TESTS=1)"
			SKIPPED+=(go)
		else
			scenario go go_scenario
		fi
		;;
	*) log "FAIL  unknown client $c"; FAILED+=("$c") ;;
	esac
done

if [ ${#FAILED[@]} -gt 0 ]; then
	log "client tests FAILED: ${FAILED[*]}"
	exit 1
fi
log "client tests passed: ${PASSED[*]}${SKIPPED[*]:+ (skipped: ${SKIPPED[*]})} in ${SECONDS}s"
