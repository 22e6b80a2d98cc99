#!/usr/bin/env bash
# Fails when `go generate ./...` changes the tree: a generated file (such as
# codec/gfni_amd64.s, from codec/gfni_gen.go) that no longer matches its
# generator was edited by hand or not regenerated. Local changes made
# before the check are left as they are; only what go generate changes
# counts.
set -euo pipefail
cd "$(dirname "$0")/.."

state() { git status --porcelain --untracked-files=all; git diff | sha256sum; }
before=$(state)
go generate ./...
if [ "$(state)" != "$before" ]; then
	echo "check-generate: go generate ./... changed the tree; regenerate and commit:"
	git status --short --untracked-files=all
	git --no-pager diff --stat
	exit 1
fi
echo "generated files are up to date"
