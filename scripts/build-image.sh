#!/usr/bin/env bash
# Builds the static regen binary and the FROM scratch image around it.
#
#   scripts/build-image.sh            # image regen:local
#   REGEN_IMAGE=regen:test scripts/build-image.sh
#
# The build context is a fresh directory holding only the binary, the
# Dockerfile and an empty data directory, so nothing else of the work tree
# is sent to the Docker daemon.
set -euo pipefail
cd "$(dirname "$0")/.."

image=${REGEN_IMAGE:-regen:local}
ctx=bin/image
rm -rf "$ctx"
mkdir -p "$ctx/data"

echo "== go build (static) -> $ctx/regen"
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/regen" ./cmd/regen
cp Dockerfile "$ctx/Dockerfile"

echo "== docker build -> $image"
# The classic builder works against every daemon here; BuildKit would need
# its own images.
DOCKER_BUILDKIT=0 docker build --quiet -t "$image" "$ctx"
echo "built $image"
