#!/usr/bin/env bash
# Builds the product's container images (images/*/Dockerfile and the root Dockerfile) with
# BuildKit, without Docker or a registry: the Debian 13 base is made here by debootstrap and
# given to every FROM that names debian:trixie-slim (or the distroless base) as a named context;
# golang:1.26 is a local stand-in (hack/images/golang). Each image is kept as an OCI layout under
# the cache, keyed by a hash of everything it is built from, and rebuilt only when that changes.
#
#   hack/images.sh                 build what is missing; print "REF DIR" per image
#   hack/images.sh --print-dir     print the cache folder only
#   IMAGES="worker jail" hack/images.sh   only these (and what they need)
#   PLATFORMS=linux/amd64,linux/arm64 hack/images.sh   the product's images for arm64 too
#
# PLATFORMS is linux/amd64 (the default: what the test node runs) or linux/amd64,linux/arm64
# (what make images-push builds). The operator's and the exporter's images are built for both
# always: they are cross-compiled Go programs. The others, for arm64, run arm64 code in their RUN
# steps (Debian's package scripts), so an arm64 emulator must be registered: hack/binfmt.sh. An
# image built for both is kept beside its amd64-only build, not in its place.
#
# Needs root (debootstrap, buildkitd) and hack/node-assets.sh (buildkitd, buildctl, runc).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
. "$HERE/lib.sh"

BASE_VERSION=trixie-v1
CACHE=${SLURM_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-operator}
OUT=$CACHE/images
TAG_SLURM=24.11
MANAGER_TAG=${MANAGER_TAG:-0.1.0}

PLATFORMS=${PLATFORMS:-linux/amd64}

case ${1:-} in
--print-dir) echo "$OUT"; exit 0 ;;
"") ;;
*) echo "usage: $0 [--print-dir]" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "images: must run as root (debootstrap, buildkitd)" >&2; exit 1; }
case $PLATFORMS in
linux/amd64) ;;
linux/amd64,linux/arm64 | linux/arm64,linux/amd64)
	PLATFORMS=linux/amd64,linux/arm64
	"$HERE/binfmt.sh" --check || {
		echo "images: PLATFORMS=$PLATFORMS needs an arm64 emulator registered in binfmt_misc: run hack/binfmt.sh first" >&2
		exit 1
	}
	;;
*) echo "images: PLATFORMS is linux/amd64 or linux/amd64,linux/arm64, not $PLATFORMS" >&2; exit 2 ;;
esac

T0=$(date +%s)
log() { echo "images: [$(($(date +%s) - T0))s] $*" >&2; }

# name | Dockerfile | image reference | extra inputs hashed with the Dockerfile's folder
CATALOG="
slurm-base|images/slurm-base/Dockerfile|docker.io/slurm-k8s/slurm-base:$TAG_SLURM|
munge|images/munge/Dockerfile|docker.io/slurm-k8s/munge:$TAG_SLURM|@slurm-base
controller|images/controller/Dockerfile|docker.io/slurm-k8s/slurmctld:$TAG_SLURM|@slurm-base
accounting|images/accounting/Dockerfile|docker.io/slurm-k8s/slurmdbd:$TAG_SLURM|@slurm-base
worker|images/worker/Dockerfile|docker.io/slurm-k8s/slurmd:$TAG_SLURM|@slurm-base go.mod go.sum cmd/slurm-jail-exec cmd/slurm-bundle internal/jailexec internal/slurmfacts internal/slurmbundle
login|images/login/Dockerfile|docker.io/slurm-k8s/login:$TAG_SLURM|@worker
jail|images/jail/Dockerfile|docker.io/slurm-k8s/jail:$TAG_SLURM|@slurm-base
manager|Dockerfile|docker.io/slurm-k8s/slurm-operator:$MANAGER_TAG|go.mod go.sum api cmd internal config/crd
exporter|images/exporter/Dockerfile|docker.io/slurm-k8s/exporter:$TAG_SLURM|go.mod go.sum api cmd/slurm-exporter internal
mariadb|test/node/mariadb/Dockerfile|docker.io/slurm-k8s-test/mariadb:11|
slapd|test/node/slapd/Dockerfile|docker.io/slurm-k8s-test/slapd:2.6|
"
# Images built for arm64 too (Grace nodes), as one multi-platform image, whatever PLATFORMS says:
# those of one static Go binary, cross-compiled on this machine's architecture.
MULTI_PLATFORM="manager exporter"
# Images built for amd64 only, whatever PLATFORMS says: the tests' own.
AMD64_ONLY="mariadb slapd"
WANT=${IMAGES:-munge controller accounting worker login jail manager exporter mariadb slapd}

NODE_ASSETS=$("$HERE/node-assets.sh" --print-dir)
[ -x "$NODE_ASSETS/bin/buildkitd" ] || NODE_ASSETS=$("$HERE/node-assets.sh")
BIN=$NODE_ASSETS/bin
mkdir -p "$OUT"
exec 8>"$OUT/.lock"
flock 8

# mkoci ROOTFS LAYOUT REF CONFIG [ARCH...] packs a root file system into a one-layer OCI image
# layout whose image config's "config" is CONFIG (JSON): one image for one architecture (amd64
# when none is named), or, for several, an image index of one image per architecture over the
# same layer (a root of files that do not depend on the architecture).
mkoci() {
	local rootfs=$1 out=$2 ref=$3 cfg=$4 t
	shift 4
	local archs=("$@")
	[ ${#archs[@]} -gt 0 ] || archs=(amd64)
	t=$(mktemp -d)
	rm -rf "$out"; mkdir -p "$out/blobs/sha256"
	tar --format=posix --numeric-owner --sort=name --mtime='2025-01-01 00:00:00Z' \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		--xattrs --xattrs-include='security.capability' \
		--exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -C "$rootfs" -cf "$t/layer.tar" .
	local diffid lsum lsize csum csize msum msize arch entries="[]"
	diffid=$(sha256sum "$t/layer.tar" | cut -d' ' -f1)
	gzip -n -1 "$t/layer.tar"
	lsum=$(sha256sum "$t/layer.tar.gz" | cut -d' ' -f1); lsize=$(stat -c %s "$t/layer.tar.gz")
	mv "$t/layer.tar.gz" "$out/blobs/sha256/$lsum"
	for arch in "${archs[@]}"; do
		jq -nc --arg d "sha256:$diffid" --arg a "$arch" --argjson cfg "$cfg" '{architecture:$a,os:"linux",created:"2025-01-01T00:00:00Z",
			config:$cfg,rootfs:{type:"layers",diff_ids:[$d]},history:[{created:"2025-01-01T00:00:00Z",created_by:"hack/images.sh"}]}' >"$t/config.json"
		csum=$(sha256sum "$t/config.json" | cut -d' ' -f1); csize=$(stat -c %s "$t/config.json")
		mv "$t/config.json" "$out/blobs/sha256/$csum"
		jq -nc --arg c "sha256:$csum" --argjson cs "$csize" --arg l "sha256:$lsum" --argjson ls "$lsize" \
			'{schemaVersion:2,mediaType:"application/vnd.oci.image.manifest.v1+json",
			config:{mediaType:"application/vnd.oci.image.config.v1+json",digest:$c,size:$cs},
			layers:[{mediaType:"application/vnd.oci.image.layer.v1.tar+gzip",digest:$l,size:$ls}]}' >"$t/manifest.json"
		msum=$(sha256sum "$t/manifest.json" | cut -d' ' -f1); msize=$(stat -c %s "$t/manifest.json")
		mv "$t/manifest.json" "$out/blobs/sha256/$msum"
		entries=$(jq -c --arg m "sha256:$msum" --argjson ms "$msize" --arg a "$arch" \
			'. + [{mediaType:"application/vnd.oci.image.manifest.v1+json",digest:$m,size:$ms,platform:{architecture:$a,os:"linux"}}]' <<<"$entries")
	done
	local top=$entries
	if [ ${#archs[@]} -gt 1 ]; then
		jq -nc --argjson m "$entries" '{schemaVersion:2,mediaType:"application/vnd.oci.image.index.v1+json",manifests:$m}' >"$t/index.json"
		msum=$(sha256sum "$t/index.json" | cut -d' ' -f1); msize=$(stat -c %s "$t/index.json")
		mv "$t/index.json" "$out/blobs/sha256/$msum"
		top=$(jq -nc --arg m "sha256:$msum" --argjson ms "$msize" '[{mediaType:"application/vnd.oci.image.index.v1+json",digest:$m,size:$ms}]')
	fi
	echo '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
	jq -nc --argjson m "$top" --arg ref "$ref" '{schemaVersion:2,mediaType:"application/vnd.oci.image.index.v1+json",
		manifests:[$m[0] + {annotations:{"io.containerd.image.name":$ref,"org.opencontainers.image.ref.name":$ref}}]}' >"$out/index.json"
	rm -rf "$t"
}

# digest LAYOUT prints the digest of a layout's one entry: an image's manifest, or the index of a
# multi-platform image.
digest() { jq -r '.manifests[0].digest' "$1/index.json"; }

# The Debian 13 base (what debian:trixie-slim is) for one architecture (amd64 when none is
# named): debootstrap minbase, the stable updates and security suites, no documentation, services
# never started during builds. An arm64 base runs its package scripts under the emulator.
build_base() {
	local arch=${1:-amd64} dir=$OUT/base-$BASE_VERSION
	[ "$arch" = amd64 ] || dir=$dir-$arch
	[ -f "$dir/index.json" ] && { echo "$dir"; return 0; }
	need_debs debootstrap
	local mirror
	mirror=${SLURM_ROOTFS_MIRROR:-$(debian_mirror || true)}
	[ -n "$mirror" ] || { log "no Debian mirror in the apt sources; set SLURM_ROOTFS_MIRROR"; exit 1; }
	local rootfs=$OUT/.base-rootfs-$arch
	rm -rf --one-file-system "$rootfs"
	local script=trixie
	[ -e /usr/share/debootstrap/scripts/trixie ] || script=/usr/share/debootstrap/scripts/sid
	local blog=$OUT/base-$arch.log
	log "debootstrap trixie ($arch) from $mirror"
	unshare --mount --propagation private -- debootstrap --arch="$arch" --variant=minbase trixie "$rootfs" "$mirror" "$script" >"$blog" 2>&1 ||
		{ tail -20 "$blog" >&2; exit 1; }
	printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"; chmod 755 "$rootfs/usr/sbin/policy-rc.d"
	printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\npath-exclude /usr/share/locale/*\npath-include /usr/share/locale/locale.alias\n' \
		>"$rootfs/etc/dpkg/dpkg.cfg.d/slim"
	echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/no-languages"
	rm -f "$rootfs/etc/apt/sources.list"
	printf 'Types: deb\nURIs: %s\nSuites: trixie trixie-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s-security\nSuites: trixie-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
		"$mirror" "${mirror%/}" >"$rootfs/etc/apt/sources.list.d/debian.sources"
	cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
	unshare --mount --propagation private -- sh -c "mount -t proc proc '$rootfs/proc' && chroot '$rootfs' sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade && apt-get clean'" >>"$blog" 2>&1 ||
		{ tail -20 "$blog" >&2; exit 1; }
	rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
	find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
	rm -f "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
	printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$rootfs/etc/hosts"
	: >"$rootfs/etc/machine-id"
	mkoci "$rootfs" "$dir.tmp" docker.io/library/debian:trixie-slim \
		'{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["bash"]}' "$arch"
	rm -rf --one-file-system "$rootfs"
	mv -T "$dir.tmp" "$dir"
	log "base image: $dir"
	echo "$dir"
}

# mkindex LAYOUT REF IMAGE_LAYOUT... makes one multi-platform image of single-platform ones: an
# OCI layout holding their blobs and an image index that names each image's manifest with the
# platform its config says.
mkindex() {
	local out=$1 ref=$2 layout entries="[]" m cfg platform
	shift 2
	rm -rf "$out"; mkdir -p "$out/blobs/sha256"
	for layout in "$@"; do
		cp -al "$layout/blobs/sha256/." "$out/blobs/sha256/"
		m=$(jq -c '.manifests[0] | {mediaType, digest, size}' "$layout/index.json")
		cfg=$(jq -r '.config.digest | ltrimstr("sha256:")' "$layout/blobs/sha256/$(jq -r '.digest | ltrimstr("sha256:")' <<<"$m")")
		platform=$(jq -c '{architecture, os}' "$layout/blobs/sha256/$cfg")
		entries=$(jq -c --argjson m "$m" --argjson p "$platform" '. + [$m + {platform: $p}]' <<<"$entries")
	done
	local t msum msize
	t=$(mktemp)
	jq -nc --argjson m "$entries" '{schemaVersion:2,mediaType:"application/vnd.oci.image.index.v1+json",manifests:$m}' >"$t"
	msum=$(sha256sum "$t" | cut -d' ' -f1); msize=$(stat -c %s "$t")
	mv "$t" "$out/blobs/sha256/$msum"; chmod 0644 "$out/blobs/sha256/$msum"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
	jq -nc --arg m "sha256:$msum" --argjson ms "$msize" --arg ref "$ref" '{schemaVersion:2,mediaType:"application/vnd.oci.image.index.v1+json",
		manifests:[{mediaType:"application/vnd.oci.image.index.v1+json",digest:$m,size:$ms,
		annotations:{"io.containerd.image.name":$ref,"org.opencontainers.image.ref.name":$ref}}]}' >"$out/index.json"
}

# The base for the multi-platform builds: the amd64 and the arm64 base under one index.
build_base_multi() {
	local dir=$OUT/base-$BASE_VERSION-multi amd64 arm64
	amd64=$(build_base amd64)
	arm64=$(build_base arm64)
	[ -f "$dir/index.json" ] && { echo "$dir"; return 0; }
	mkindex "$dir.tmp" docker.io/library/debian:trixie-slim "$amd64" "$arm64"
	mv -T "$dir.tmp" "$dir"
	echo "$dir"
}

# The base of the images that hold one static Go binary (what gcr.io/distroless/static:nonroot
# is): no shell, no libraries, only the files such a program looks for (passwd and group with
# root, nobody and nonroot 65532, nonroot's home, /tmp). None of them depends on the
# architecture, so one layer serves amd64 and arm64, and images built on it for arm64 run no
# arm64 code at build time (their binaries are cross-compiled).
STATIC_VERSION=v1
build_static() {
	local dir=$OUT/static-$STATIC_VERSION
	[ -f "$dir/index.json" ] && { echo "$dir"; return 0; }
	local rootfs
	rootfs=$(mktemp -d)
	mkdir -p "$rootfs/etc" "$rootfs/tmp" "$rootfs/root" "$rootfs/home/nonroot"
	chmod 0755 "$rootfs" "$rootfs/etc" "$rootfs/home"
	chmod 1777 "$rootfs/tmp"; chmod 0700 "$rootfs/root"; chmod 0700 "$rootfs/home/nonroot"
	chown 65532:65532 "$rootfs/home/nonroot"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rootfs/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
	chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
	mkoci "$rootfs" "$dir.tmp" gcr.io/distroless/static:nonroot \
		'{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"User":"65532","WorkingDir":"/home/nonroot"}' amd64 arm64
	rm -rf "$rootfs"
	mv -T "$dir.tmp" "$dir"
	echo "$dir"
}

BK=$CACHE/buildkit
BK_SOCK=$BK/run/buildkitd.sock
BK_PID=""
start_buildkitd() {
	[ -n "$BK_PID" ] && return 0
	mkdir -p "$BK/root" "$BK/run"
	cat >"$BK/buildkitd.toml" <<TOML
root = "$BK/root"
[grpc]
  address = ["unix://$BK_SOCK"]
[otel]
  socketPath = "$BK/run/otel-grpc.sock"
[cdi]
  disabled = true
[worker.oci]
  enabled = true
  snapshotter = "overlayfs"
  binary = "$BIN/runc"
  gc = true
  reservedSpace = "2GB"
  maxUsedSpace = "20GB"
[worker.containerd]
  enabled = false
TOML
	PATH=$BIN:$PATH "$BIN/buildkitd" --config "$BK/buildkitd.toml" >"$BK/buildkitd.log" 2>&1 &
	BK_PID=$!
	trap stop_buildkitd EXIT
	local i
	for i in $(seq 1 60); do
		"$BIN/buildctl" --addr "unix://$BK_SOCK" debug workers >/dev/null 2>&1 && return 0
		kill -0 "$BK_PID" 2>/dev/null || break
		sleep 0.5
	done
	tail -20 "$BK/buildkitd.log" >&2
	log "buildkitd did not start"
	exit 1
}
stop_buildkitd() {
	[ -n "$BK_PID" ] || return 0
	kill "$BK_PID" 2>/dev/null || true
	wait "$BK_PID" 2>/dev/null || true
	BK_PID=""
	# buildkitd's runc state and mounts go with it; its cgroups stay empty and are removed.
	find /sys/fs/cgroup -depth -type d -name buildkit -exec rmdir {} + 2>/dev/null || true
}

BASE=$(build_base)
BASE_DGST=$(digest "$BASE")
AMD64_BASE=$BASE AMD64_BASE_DGST=$BASE_DGST
if [ "$PLATFORMS" != linux/amd64 ]; then
	BASE=$(build_base_multi)
	BASE_DGST=$(digest "$BASE")
fi
STATIC=$(build_static)
STATIC_DGST=$(digest "$STATIC")

# build NAME DOCKERFILE REF LAYOUT [buildctl options...]
build() {
	local name=$1 dockerfile=$2 ref=$3 dest=$4
	shift 4
	start_buildkitd
	log "building $name ($ref)"
	local t=$dest.tmp
	rm -rf "$t"
	# Images with Go code build from the repository (its .dockerignore); the others from their
	# own folder.
	local context=$ROOT/$(dirname "$dockerfile")
	grep -q 'GO_IMAGE' "$ROOT/$dockerfile" && context=$ROOT
	if ! "$BIN/buildctl" --addr "unix://$BK_SOCK" build --progress=plain \
		--frontend dockerfile.v0 --opt cmdline= \
		--local context="$context" --local dockerfile="$ROOT/$(dirname "$dockerfile")" --opt filename="$(basename "$dockerfile")" \
		--oci-layout base="$BASE" --oci-layout static="$STATIC" \
		--opt "context:debian:trixie-slim=oci-layout://base@$BASE_DGST" \
		--opt "context:gcr.io/distroless/static:nonroot=oci-layout://static@$STATIC_DGST" \
		"$@" --output "type=oci,tar=false,dest=$t,name=$ref" >"$OUT/$name.log" 2>&1; then
		tail -40 "$OUT/$name.log" >&2
		log "building $name failed (log: $OUT/$name.log)"
		exit 1
	fi
	# buildctl's layout may name the image by its tag only; containerd wants the full name.
	jq --arg ref "$ref" '.manifests[0].annotations["io.containerd.image.name"] = $ref' "$t/index.json" >"$t/index.json.new"
	mv "$t/index.json.new" "$t/index.json"
	rm -rf "$dest"; mv -T "$t" "$dest"
}

# inputs_hash FILES... hashes the content of files and folders (and this script, less its
# catalog: adding an image rebuilds no other).
inputs_hash() {
	(
		cd "$ROOT"
		{
			grep -Ev '^[a-z-]+\|[^|]*\|[^|]*\||^WANT=' "$HERE/images.sh" | sha256sum
			echo "$BASE_DGST $STATIC_DGST"
			find "$@" -type f -not -name '*_test.go' -print0 | sort -z | xargs -0 sha256sum
		} | sha256sum | cut -c1-16
	)
}

GOLANG=""
golang_image() {
	[ -n "$GOLANG" ] && return 0
	# The Go stages run on the build machine's platform (FROM --platform=$BUILDPLATFORM), so the
	# stand-in is amd64's whatever PLATFORMS says: one image, shared by every build.
	local BASE=$AMD64_BASE BASE_DGST=$AMD64_BASE_DGST
	local h ctx
	h=$(cd "$ROOT" && { go version; inputs_hash hack/images/golang; } | sha256sum | cut -c1-16)
	GOLANG=$OUT/golang-$h
	[ -f "$GOLANG/index.json" ] && return 0
	ctx=$(mktemp -d)
	cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
	build golang hack/images/golang/Dockerfile docker.io/library/golang:1.26 "$GOLANG" \
		--local gotree="$(go env GOROOT)" --opt context:gotree=local:gotree \
		--local hostca="$ctx" --opt context:hostca=local:hostca \
		--opt build-arg:GOPROXY="$(go env GOPROXY)"
	rm -rf "$ctx"
	find "$OUT" -maxdepth 1 -name "golang-*" -not -path "$GOLANG" -exec rm -rf {} +
}

declare -A DONE=()
build_image() {
	local want=$1 line name df ref inputs
	[ -n "${DONE[$want]:-}" ] && return 0
	line=$(echo "$CATALOG" | grep "^$want|") || { log "no image $want"; exit 2; }
	IFS='|' read -r name df ref inputs <<<"$line"
	local extra=() paths=("$(dirname "$df")")
	[ "$df" = Dockerfile ] && paths=(Dockerfile .dockerignore)
	local in
	for in in $inputs; do
		case $in in
		@*)
			build_image "${in#@}"
			local dep=${DONE[${in#@}]} depref
			depref=$(echo "$CATALOG" | grep "^${in#@}|" | cut -d'|' -f3)
			extra+=(--oci-layout "${in#@}=$dep" --opt "context:${depref#docker.io/}=oci-layout://${in#@}@$(digest "$dep")")
			paths+=("$dep/index.json")
			;;
		*) paths+=("$in") ;;
		esac
	done
	# flavour names the builds of an image for PLATFORMS beside those for amd64 alone.
	local flavour=""
	case " $MULTI_PLATFORM " in
	*" $name "*)
		# Built the same whatever PLATFORMS says (on the static base, not Debian's), so one
		# build serves both.
		local BASE=$AMD64_BASE BASE_DGST=$AMD64_BASE_DGST
		extra+=(--opt platform=linux/amd64,linux/arm64)
		;;
	*)
		case " $AMD64_ONLY " in
		*" $name "*) ;;
		*) [ "$PLATFORMS" = linux/amd64 ] || { extra+=(--opt "platform=$PLATFORMS"); flavour=+arm64; } ;;
		esac
		;;
	esac
	if grep -q 'GO_IMAGE' "$ROOT/$df"; then
		golang_image
		extra+=(--oci-layout golang="$GOLANG" --opt "context:golang:1.26=oci-layout://golang@$(digest "$GOLANG")")
		paths+=("$GOLANG/index.json")
	fi
	local dest
	dest=$OUT/$name$flavour-$(inputs_hash "${paths[@]}")
	if [ ! -f "$dest/index.json" ]; then
		build "$name" "$df" "$ref" "$dest" "${extra[@]}"
		# Older builds of this image for the same platforms are of no more use.
		find "$OUT" -maxdepth 1 -name "$name$flavour-????????????????" -not -path "$dest" -exec rm -rf {} +
	fi
	DONE[$name]=$dest
	echo "$ref $dest"
}

for w in $WANT; do build_image "$w"; done
stop_buildkitd
log "done"
