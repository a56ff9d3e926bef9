#!/usr/bin/env bash
# Builds the real Kubernetes test binaries (kube-apiserver, etcd, kubectl, helm) from the Go module
# proxy at pinned versions, into a cache outside the clone, and prints the folder.
# Work is skipped when the binaries exist.
# Usage: hack/test-assets.sh [--print-dir]
#        hack/test-assets.sh --k8s NAME...   (only these k8s.io/kubernetes/cmd binaries; hack/node-assets.sh uses it)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
K8S_STAGING_VERSION=${K8S_STAGING_VERSION:-v0.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
CACHE=${SLURM_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-operator}
OUT="$CACHE/k8s/$K8S_VERSION-etcd-$ETCD_VERSION"

if [ "${1:-}" = "--print-dir" ]; then echo "$OUT"; exit 0; fi
ONLY_K8S=()
if [ "${1:-}" = "--k8s" ]; then shift; ONLY_K8S=("$@"); fi

export GOFLAGS="-buildvcs=false -modcacherw" GOWORK=off
mkdir -p "$OUT/src"
log() { echo "test-assets: $*" >&2; }

# k8s_module prepares (once) a scratch module that requires k8s.io/kubernetes at the pinned
# version, with its staging modules pinned to the matching release.
k8s_module() {
  local src="$OUT/src/k8s"
  cd "$src" 2>/dev/null && [ -f .ready-all ] && return 0
  rm -rf "$src"; mkdir -p "$src"; cd "$src"
  go mod init slurm-operator-test-assets/k8s >/dev/null 2>&1
  go get "k8s.io/kubernetes@$K8S_VERSION" >/dev/null 2>&1
  # k8s.io/kubernetes requires its staging modules at v0.0.0; pin each to the release.
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  for m in $(awk '$1 ~ /^k8s.io\// && $2=="v0.0.0" {print $1}' "$gomod" | sort -u); do
    go mod edit -replace "$m=$m@$K8S_STAGING_VERSION"
  done
  # Every binary a test may need, so that one module (and one go.sum) serves them all.
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in kube-apiserver kubectl kubelet kube-proxy kube-controller-manager kube-scheduler; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'
  } > tools.go
  go mod tidy >/dev/null 2>&1
  touch .ready-all
}

# build_k8s NAME builds k8s.io/kubernetes/cmd/NAME with version ldflags, unless it exists.
build_k8s() {
  local name=$1
  [ -x "$OUT/$name" ] && return 0
  log "building $name $K8S_VERSION (the first one takes about 6 minutes cold on 2 cores)"
  k8s_module
  local v=${K8S_VERSION#v} maj min
  maj=$(echo "$v" | cut -d. -f1); min=$(echo "$v" | cut -d. -f2)
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=$maj -X k8s.io/component-base/version.gitMinor=$min -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=$maj -X k8s.io/client-go/pkg/version.gitMinor=$min"
  CGO_ENABLED=0 go build -ldflags "$ld" -o "$OUT/$name.tmp" "k8s.io/kubernetes/cmd/$name"
  mv "$OUT/$name.tmp" "$OUT/$name"
}

build_etcd() {
  [ -x "$OUT/etcd" ] && return 0
  log "building etcd $ETCD_VERSION (about 1 minute cold)"
  local src="$OUT/src/etcd"
  rm -rf "$src"; mkdir -p "$src"; cd "$src"
  go mod init slurm-operator-test-assets/etcd >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1
  CGO_ENABLED=0 go build -ldflags "-s -w" -o "$OUT/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$OUT/etcd.tmp" "$OUT/etcd"
}

build_helm() {
  [ -x "$OUT/helm" ] && return 0
  log "building helm $HELM_VERSION (about 2 minutes cold)"
  local src="$OUT/src/helm"
  rm -rf "$src"; mkdir -p "$src"; cd "$src"
  go mod init slurm-operator-test-assets/helm >/dev/null 2>&1
  go get "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >/dev/null 2>&1
  CGO_ENABLED=0 go build -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" -o "$OUT/helm.tmp" helm.sh/helm/v3/cmd/helm
  mv "$OUT/helm.tmp" "$OUT/helm"
}

mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9
if [ ${#ONLY_K8S[@]} -gt 0 ]; then
  for n in "${ONLY_K8S[@]}"; do build_k8s "$n"; done
  echo "$OUT"
  exit 0
fi
build_etcd
build_k8s kube-apiserver
build_k8s kubectl
build_helm
echo "$OUT"
