#!/usr/bin/env bash
# Builds what a real one-node Kubernetes needs beyond hack/test-assets.sh, from the Go module
# proxy at pinned versions, into a cache outside the clone, and prints the folder:
# kubelet, kube-proxy, kube-controller-manager, kube-scheduler (same scratch module and version
# as the API server), containerd + ctr + shim, runc, the CNI plugins, CoreDNS and BuildKit; and,
# in a folder of its own (so that its version does not touch the others' cache), kube-router,
# whose network policy controller alone enforces NetworkPolicies on the node (hack/node.sh).
# Work is skipped when a binary exists.
# Usage: hack/node-assets.sh [--print-dir | --kube-router]
#   --print-dir     print the folder of the node's binaries, build nothing
#   --kube-router   print the kube-router binary's path, build nothing
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RUNC_VERSION=${RUNC_VERSION:-v1.5.3}
CNI_VERSION=${CNI_VERSION:-v1.10.0}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
BUILDKIT_VERSION=${BUILDKIT_VERSION:-v0.34.2}
# The newest kube-router the module proxy serves (it refuses v2.1.1 and later). Its published
# advisories are in the routing controller (GoBGP's API on the node address) and the service
# proxy (external IPs), which hack/node.sh never runs; its HTTP/2, gRPC and protobuf modules,
# whose versions in its go.mod have known flaws, are raised to these fixed versions.
KUBE_ROUTER_VERSION=${KUBE_ROUTER_VERSION:-v2.1.0}
KUBE_ROUTER_DEPS="golang.org/x/net@v0.63.0 google.golang.org/protobuf@v1.36.12 google.golang.org/grpc@v1.85.0"
CACHE=${SLURM_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-operator}
OUT="$CACHE/node/k8s-$K8S_VERSION-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-cni-$CNI_VERSION-coredns-$COREDNS_VERSION-buildkit-$BUILDKIT_VERSION"

# A folder of its own, keyed by the version and the raised modules: the big folder's name, and
# so its cache, stay as they were.
KR_OUT="$CACHE/node/kube-router-$KUBE_ROUTER_VERSION-$(echo "$KUBE_ROUTER_DEPS" | sha256sum | cut -c1-8)"

case ${1:-} in
--print-dir) echo "$OUT"; exit 0 ;;
--kube-router) echo "$KR_OUT/kube-router"; exit 0 ;;
esac

export GOFLAGS="-buildvcs=false -modcacherw" GOWORK=off
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/bin" "$OUT/cni-bin" "$OUT/src"
log() { echo "node-assets: $*" >&2; }

. "$HERE/lib.sh"

mod() {
	local d="$OUT/src/$1"
	rm -rf "$d"; mkdir -p "$d"; cd "$d"
	go mod init "slurm-operator-node-assets/$1" >/dev/null 2>&1
}

# The Kubernetes node binaries come from the same scratch module as the API server.
build_k8s_node() {
	local k8s_out
	k8s_out=$("$HERE/test-assets.sh" --print-dir)
	local want=()
	local n
	for n in kubelet kube-proxy kube-controller-manager kube-scheduler; do
		[ -x "$OUT/bin/$n" ] || want+=("$n")
	done
	[ ${#want[@]} -eq 0 ] && return 0
	log "building ${want[*]} $K8S_VERSION (about 5 minutes cold on 2 cores)"
	"$HERE/test-assets.sh" --k8s "${want[@]}" >/dev/null
	for n in "${want[@]}"; do cp "$k8s_out/$n" "$OUT/bin/$n.tmp" && mv "$OUT/bin/$n.tmp" "$OUT/bin/$n"; done
}

build_containerd() {
	[ -x "$OUT/bin/containerd" ] && [ -x "$OUT/bin/ctr" ] && [ -x "$OUT/bin/containerd-shim-runc-v2" ] && return 0
	log "building containerd $CONTAINERD_VERSION (about 2 minutes cold)"
	mod containerd
	local p=github.com/containerd/containerd/v2/cmd
	go get "$p/containerd@$CONTAINERD_VERSION" >/dev/null 2>&1
	CGO_ENABLED=0 go build -tags "no_btrfs no_devmapper no_zfs" -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
		-o "$OUT/src/containerd/" "$p/containerd" "$p/ctr" "$p/containerd-shim-runc-v2"
	for n in containerd ctr containerd-shim-runc-v2; do mv "$OUT/src/containerd/$n" "$OUT/bin/$n"; done
}

build_runc() {
	[ -x "$OUT/bin/runc" ] && return 0
	log "building runc $RUNC_VERSION"
	need_debs gcc pkg-config libseccomp-dev
	mod runc
	go get "github.com/opencontainers/runc@$RUNC_VERSION" >/dev/null 2>&1
	CGO_ENABLED=1 go build -tags seccomp -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" -o "$OUT/bin/runc.tmp" github.com/opencontainers/runc
	mv "$OUT/bin/runc.tmp" "$OUT/bin/runc"
}

build_cni() {
	[ -x "$OUT/cni-bin/bridge" ] && [ -x "$OUT/cni-bin/portmap" ] && return 0
	log "building CNI plugins $CNI_VERSION"
	mod cni
	local p=github.com/containernetworking/plugins/plugins
	go get "$p/main/bridge@$CNI_VERSION" "$p/ipam/host-local@$CNI_VERSION" "$p/main/loopback@$CNI_VERSION" "$p/meta/portmap@$CNI_VERSION" >/dev/null 2>&1
	CGO_ENABLED=0 go build -ldflags "-s -w" -o "$OUT/src/cni/" "$p/main/bridge" "$p/ipam/host-local" "$p/main/loopback" "$p/meta/portmap"
	for n in bridge host-local loopback portmap; do mv "$OUT/src/cni/$n" "$OUT/cni-bin/$n"; done
}

build_coredns() {
	[ -x "$OUT/bin/coredns" ] && return 0
	log "building CoreDNS $COREDNS_VERSION (about 3 minutes cold)"
	mod coredns
	go get "github.com/coredns/coredns@$COREDNS_VERSION" >/dev/null 2>&1
	CGO_ENABLED=0 go build -ldflags "-s -w" -o "$OUT/bin/coredns.tmp" github.com/coredns/coredns
	mv "$OUT/bin/coredns.tmp" "$OUT/bin/coredns"
}

# BuildKit's go.mod has exclude directives, so `go install mod@version` is refused: build the
# module's own source tree as the main module.
build_buildkit() {
	[ -x "$OUT/bin/buildkitd" ] && [ -x "$OUT/bin/buildctl" ] && return 0
	log "building BuildKit $BUILDKIT_VERSION (about 5 minutes cold)"
	local dir
	dir=$(go mod download -json "github.com/moby/buildkit@$BUILDKIT_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
	[ -n "$dir" ] || { log "cannot download github.com/moby/buildkit@$BUILDKIT_VERSION"; exit 1; }
	rm -rf "$OUT/src/buildkit"; cp -r "$dir" "$OUT/src/buildkit"; chmod -R u+w "$OUT/src/buildkit"
	cd "$OUT/src/buildkit"
	local ld="-s -w -X github.com/moby/buildkit/version.Version=$BUILDKIT_VERSION -X github.com/moby/buildkit/version.Package=github.com/moby/buildkit"
	CGO_ENABLED=0 go build -trimpath -tags "osusergo netgo" -ldflags "$ld" -o "$OUT/bin/buildkitd.tmp" ./cmd/buildkitd
	CGO_ENABLED=0 go build -trimpath -tags "osusergo netgo" -ldflags "$ld" -o "$OUT/bin/buildctl.tmp" ./cmd/buildctl
	mv "$OUT/bin/buildkitd.tmp" "$OUT/bin/buildkitd"; mv "$OUT/bin/buildctl.tmp" "$OUT/bin/buildctl"
}

# kube-router: only its network policy controller runs (hack/node.sh). Its go.mod has no
# replace or exclude directives, so a scratch module that requires it builds what its own tree
# would, with KUBE_ROUTER_DEPS raised on top.
build_kube_router() {
	[ -x "$KR_OUT/kube-router" ] && return 0
	log "building kube-router $KUBE_ROUTER_VERSION (about 4 minutes cold on 2 idle cores, 8 on busy ones)"
	local d=$KR_OUT/src p=github.com/cloudnativelabs/kube-router/v2
	rm -rf "$d"; mkdir -p "$d"; cd "$d"
	go mod init slurm-operator-node-assets/kube-router >/dev/null 2>&1
	# shellcheck disable=SC2086 # a list of module@version words
	go get "$p/cmd/kube-router@$KUBE_ROUTER_VERSION" $KUBE_ROUTER_DEPS >/dev/null 2>&1
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X $p/pkg/version.Version=$KUBE_ROUTER_VERSION" \
		-o "$KR_OUT/kube-router.tmp" "$p/cmd/kube-router"
	mv "$KR_OUT/kube-router.tmp" "$KR_OUT/kube-router"
}

mkdir -p "$CACHE/node"
exec 9>"$CACHE/node/.lock"
flock 9
build_k8s_node
build_containerd
build_runc
build_cni
build_buildkit
build_coredns
build_kube_router
echo "$OUT"
