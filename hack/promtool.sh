#!/usr/bin/env bash
# Installs promtool (for test/alerts) into the cache once and prints its path.
#
# The quick way is Debian's `promtool` package at a pinned version, checked against its
# SHA-256 and unpacked, never installed: one 17 MB download instead of a build of the
# Prometheus module, which takes about 6 minutes on 2 cores. The package is a statically
# linked Go program that needs only glibc 2.34, so it runs on this machine's Debian 12 too.
# Where the mirror no longer serves that version (Debian's unstable suite moves on), or on
# another architecture, promtool is built from the Prometheus module at a pinned version.
#
# Usage: hack/promtool.sh [--print-path]   (--print-path only says where it is or would be)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# Prometheus 3.5, as built by Debian's unstable suite.
DEB_VERSION=${PROMTOOL_DEB_VERSION:-3.5.3+ds1-6}
DEB_SHA256=${PROMTOOL_DEB_SHA256:-1fb8bad7b932e7a44bccb12517f0bd96d5d5d83f15d3a1c0e2aa705cbf93fe90}
# The module version built when the package cannot be had.
MODULE_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
CACHE=${SLURM_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-operator}
TOOLS="$CACHE/tools"
FROM_DEB="$TOOLS/promtool-deb-$DEB_VERSION"
FROM_MODULE="$TOOLS/promtool-$MODULE_VERSION"
log() { echo "promtool: $*" >&2; }

have() {
	local p
	for p in "$FROM_DEB" "$FROM_MODULE"; do
		[ -x "$p" ] && { echo "$p"; return 0; }
	done
	return 1
}

if [ "${1:-}" = "--print-path" ]; then have || echo "$FROM_DEB"; exit 0; fi
have && exit 0
mkdir -p "$TOOLS"
work=$(mktemp -d "$TOOLS/.promtool.XXXXXX")
trap 'rm -rf "$work"' EXIT

from_deb() {
	[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || return 1
	command -v dpkg-deb >/dev/null && command -v curl >/dev/null || return 1
	local mirror url
	mirror=${SLURM_ROOTFS_MIRROR:-$(debian_mirror || true)}
	mirror=${mirror:-http://deb.debian.org/debian}
	url="${mirror%/}/pool/main/p/prometheus/promtool_${DEB_VERSION}_amd64.deb"
	log "downloading Debian's promtool $DEB_VERSION"
	curl -fsSL --retry 3 -o "$work/promtool.deb" "$url" || { log "$url: not served"; return 1; }
	echo "$DEB_SHA256  $work/promtool.deb" | sha256sum -c --quiet - ||
		{ log "$url: SHA-256 differs from the pinned one"; return 1; }
	dpkg-deb -x "$work/promtool.deb" "$work/root"
	"$work/root/usr/bin/promtool" --version >/dev/null || return 1
	mv "$work/root/usr/bin/promtool" "$FROM_DEB"
	echo "$FROM_DEB"
}

from_module() {
	log "building promtool from the Prometheus module $MODULE_VERSION (about 6 minutes cold)"
	GOBIN="$work/bin" GOFLAGS=-buildvcs=false go install \
		"github.com/prometheus/prometheus/cmd/promtool@$MODULE_VERSION" >&2
	mv "$work/bin/promtool" "$FROM_MODULE"
	echo "$FROM_MODULE"
}

from_deb || from_module
