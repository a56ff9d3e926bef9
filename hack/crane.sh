#!/usr/bin/env bash
# Builds crane (go-containerregistry's registry client, which also serves a registry) at a pinned
# version into the cache once, and prints its path. `make images-push` pushes with it; the image
# tests also run its registry server (`crane registry serve`).
#
# Usage: hack/crane.sh [--print-path]   (--print-path only says where it is or would be)
set -euo pipefail

VERSION=${CRANE_VERSION:-v0.22.1}
CACHE=${SLURM_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-operator}
TOOLS=$CACHE/tools
BIN=$TOOLS/crane-$VERSION

if [ "${1:-}" = "--print-path" ]; then echo "$BIN"; exit 0; fi
[ -x "$BIN" ] && { echo "$BIN"; exit 0; }
mkdir -p "$TOOLS"
work=$(mktemp -d "$TOOLS/.crane.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "crane: building github.com/google/go-containerregistry/cmd/crane@$VERSION" >&2
GOBIN=$work CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' "github.com/google/go-containerregistry/cmd/crane@$VERSION" >&2
mv "$work/crane" "$BIN"
echo "$BIN"
