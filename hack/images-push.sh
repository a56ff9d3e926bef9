#!/usr/bin/env bash
# Builds every image of the product (hack/images.sh) and pushes it to a registry as a
# multi-platform manifest (an OCI image index naming each image's platform), then writes values
# files that pin every image by digest: one for the cluster chart (helm-slurm-cluster), one for
# the operator chart.
#
#   hack/images-push.sh REGISTRY [TAG]
#       REGISTRY  where the images go: host[:port][/path], as in REGISTRY/slurmctld:TAG
#       TAG       the tag of every image; by default each image's own (24.11 for Slurm's, the
#                 operator's version for the operator)
#   make images-push REGISTRY=registry.example.com/hpc TAG=24.11-1
#
# Environment: OUT (folder of the values files; default the image cache), CRANE_INSECURE=1 for a
# registry served over plain HTTP (crane talks plain HTTP to localhost and 127.0.0.1 anyway),
# the registry's credentials as crane finds them (~/.docker/config.json: `crane auth login`), and
# PLATFORMS: linux/amd64,linux/arm64 (the default) or linux/amd64.
#
# Every image is built for amd64 and arm64 (NVIDIA Grace nodes). The Slurm images and the jail
# run Debian's package scripts at build time, which for arm64 are arm64 programs: when this
# machine cannot run them yet, hack/binfmt.sh registers QEMU's arm64 emulator for the build and
# the entry is removed again at the end (docs/images.md, "Platforms").
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REGISTRY=${1:-${REGISTRY:-}}
TAG=${2:-${TAG:-}}
[ -n "$REGISTRY" ] || { echo "usage: $0 REGISTRY [TAG]   (make images-push REGISTRY=host/path TAG=tag)" >&2; exit 2; }
REGISTRY=${REGISTRY%/}
case $REGISTRY in
*://*) echo "images-push: REGISTRY is host[:port][/path], without a scheme: $REGISTRY" >&2; exit 2 ;;
esac
if [ -n "$TAG" ] && ! [[ $TAG =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]]; then
	echo "images-push: TAG $TAG is not a valid image tag" >&2
	exit 2
fi

PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
case $PLATFORMS in
linux/amd64 | linux/amd64,linux/arm64 | linux/arm64,linux/amd64) ;;
*) echo "images-push: PLATFORMS is linux/amd64,linux/arm64 (the default) or linux/amd64, not $PLATFORMS" >&2; exit 2 ;;
esac
export PLATFORMS
if [ "$PLATFORMS" != linux/amd64 ] && ! "$HERE/binfmt.sh" --check; then
	echo "images-push: registering an arm64 emulator for the build (hack/binfmt.sh)" >&2
	"$HERE/binfmt.sh" >/dev/null
	trap '"$HERE/binfmt.sh" --remove' EXIT
fi

CRANE=$("$HERE/crane.sh")
crane() { "$CRANE" ${CRANE_INSECURE:+--insecure} "$@"; }
CACHE=${SLURM_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-operator}
OUT=${OUT:-$CACHE/images}
mkdir -p "$OUT"

# The images the product's pods run (not the build's bases, not the tests' MariaDB).
built=$(IMAGES="munge controller accounting worker login jail manager exporter" "$HERE/images.sh")

declare -A pinned tags digests
while read -r ref dir; do
	[ -n "$ref" ] || continue
	repo=${ref%:*}
	name=${repo##*/}
	# The Slurm images' common base (built as their dependency) runs in no pod.
	[ "$name" != slurm-base ] || continue
	tag=${TAG:-${ref##*:}}
	dest=$REGISTRY/$name:$tag
	echo "images-push: $name → $dest" >&2
	# The image's manifest first (by digest, under the tag for a moment), then the index that
	# names it with its platform, under the tag.
	image=$(crane push "$dir" "$dest")
	crane index append -m "$image" -t "$dest" >/dev/null
	digest=$(crane digest "$dest")
	pinned[$name]=$dest@$digest tags[$name]=$tag digests[$name]=$digest
	echo "$dest@$digest"
done <<<"$built"

for name in slurmctld slurmd login slurmdbd munge exporter jail slurm-operator; do
	[ -n "${pinned[$name]:-}" ] || { echo "images-push: $name was not built" >&2; exit 1; }
done

# helm-slurm-cluster's values are the SlurmCluster's spec.
cat >"$OUT/cluster-images-values.yaml" <<EOF
# The images pushed by hack/images-push.sh, pinned by digest: helm install … -f this file.
images:
  controller: ${pinned[slurmctld]}
  worker: ${pinned[slurmd]}
  login: ${pinned[login]}
  accounting: ${pinned[slurmdbd]}
  munge: ${pinned[munge]}
  exporter: ${pinned[exporter]}
populateJail:
  image: ${pinned[jail]}
EOF
cat >"$OUT/operator-images-values.yaml" <<EOF
# The operator's image pushed by hack/images-push.sh, pinned by digest.
image:
  repository: $REGISTRY/slurm-operator
  tag: "${tags[slurm-operator]}"
  digest: ${digests[slurm-operator]}
EOF
echo "images-push: values pinning the images by digest: $OUT/cluster-images-values.yaml $OUT/operator-images-values.yaml" >&2
