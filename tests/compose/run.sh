#!/usr/bin/env bash
# The Docker Compose test: builds the image, starts the cluster of
# docker-compose.yml under a project name of its own, waits until every
# container is healthy, then runs TestComposeCluster (compose_test.go
# beside this file), which uploads objects of both storage classes through
# one gateway, reads them through the other, kills two shard servers and
# checks every object byte for byte. The cluster, its volumes, its network
# and the test image are removed on every exit, passed or failed.
#
#   tests/compose/run.sh
#
# Traffic goes only to 127.0.0.1 (the gateways' published ports, chosen
# free by Docker) and to the project's own containers.
set -euo pipefail
cd "$(dirname "$0")/../.."

if docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif command -v docker-compose >/dev/null; then
	compose=(docker-compose)
else
	echo "compose test: neither 'docker compose' nor docker-compose is installed" >&2
	exit 1
fi

project="regen-ci-$$-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')"
export REGEN_IMAGE="regen:$project"
export REGEN_CLUSTER_SECRET="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export REGEN_ACCESS_KEY="ci-access" REGEN_SECRET_KEY="ci-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
# Empty ports: Docker picks free host ports on 127.0.0.1.
export REGEN_HOST_IP=127.0.0.1 REGEN_S3_PORT= REGEN_S3_PORT_2=
export REGEN_LOG_FORMAT=text
export REGEN_REPAIR_GRACE=5s
# The SSE-S3 key file, made as the README says, in a directory of its own
# that cleanup removes.
keydir=$(mktemp -d)
(umask 022; echo "ci $(head -c 32 /dev/urandom | base64)" > "$keydir/sse-keys")
export REGEN_SSE_KEY_FILE="$keydir/sse-keys"
dc=("${compose[@]}" -p "$project" -f "$PWD/docker-compose.yml")

status=0
cleanup() {
	status=$?
	if [ "$status" -ne 0 ]; then
		echo "== compose test failed (status $status); last logs:"
		"${dc[@]}" ps || true
		"${dc[@]}" logs --no-color --tail 20 2>&1 | tail -200 || true
	fi
	echo "== compose down -v ($project)"
	timeout 120 "${dc[@]}" down -v --remove-orphans -t 5 >/dev/null 2>&1 || true
	docker rmi -f "$REGEN_IMAGE" >/dev/null 2>&1 || true
	rm -rf "$keydir"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== build image $REGEN_IMAGE"
timeout 600 scripts/build-image.sh

echo "== compose up ($project)"
timeout 180 "${dc[@]}" up -d

echo "== wait for 14 healthy containers"
deadline=$((SECONDS + 120))
while :; do
	ids=$("${dc[@]}" ps -q)
	total=$(echo "$ids" | grep -c . || true)
	healthy=$(docker inspect -f '{{.State.Health.Status}}' $ids 2>/dev/null | grep -c '^healthy$' || true)
	[ "$total" -eq 14 ] && [ "$healthy" -eq 14 ] && break
	if [ "$SECONDS" -ge "$deadline" ]; then
		echo "only $healthy of $total containers healthy after 120s" >&2
		exit 1
	fi
	sleep 2
done

port() { "${dc[@]}" port "$1" 9000 | tail -1 | sed 's/.*://'; }
export REGEN_COMPOSE_ENDPOINT1="http://127.0.0.1:$(port gateway1)"
export REGEN_COMPOSE_ENDPOINT2="http://127.0.0.1:$(port gateway2)"
export REGEN_COMPOSE_PROJECT="$project"
export REGEN_COMPOSE_CMD="${dc[*]}"
export REGEN_BIN="$PWD/bin/image/regen"
echo "== gateways at $REGEN_COMPOSE_ENDPOINT1 and $REGEN_COMPOSE_ENDPOINT2"

timeout 600 go test ./tests/compose -run TestComposeCluster -count=1 -v -timeout 9m
