#!/usr/bin/env bash
# Prepares what test/gpu/check.sh needs on a GPU machine that has no network and no Go: a
# slim jail (slurmd and its plugins, a shell, the tools the GPU active checks use, and the
# libraries they load, taken from the real-Slurm rootfs), the operator's GPU active checks as it
# submits them, the jail entrypoint, and a program that loads CUDA and NVML the way a job does.
# EXTRA_JAILS adds slim jails of other Slurm installs (below).
# Everything lands in .gpu-check/ and, compressed, .gpu-check.tar.xz (both ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpu-check
rm -rf "$out" && mkdir -p "$out"

CGO_ENABLED=0 go build -o "$out/slurm-jail-exec" ./cmd/slurm-jail-exec
gcc -O2 -o "$out/jail-cudacheck" test/gpu/cudacheck.c -ldl
marker=$(sed -n 's/^\s*JailMarkerFile *= *"\(.*\)"$/\1/p' internal/slurmfacts/slurmfacts.go)
[ -n "$marker" ] || { echo "bundle: the jail marker's name is not in internal/slurmfacts" >&2; exit 1; }

# slim_jail ROOTFS DIR PLUGINDIR PROGRAM... copies the programs, the plugins and every library
# they load (ldd in the rootfs, so the rootfs's own loader and paths answer) into DIR.
slim_jail() {
	local rootfs=$1 dir=$2 plugindir=$3
	shift 3
	local progs=("$@") plugins=() list
	[ -z "$plugindir" ] || mapfile -t plugins < <(cd "$rootfs" && find "${plugindir#/}" -name '*.so' | sed 's|^|/|')
	list=$(mktemp)
	for f in "${progs[@]}" "${plugins[@]}"; do
		echo "$f"
		chroot "$rootfs" /usr/bin/ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^\t\//{print $1}' || true
	done >"$list"
	# What the driver's own libraries and a bundled Slurm load (a real jail has all of libc).
	for l in libdl.so.2 libpthread.so.0 librt.so.1 libm.so.6 libgcc_s.so.1 libresolv.so.2 libutil.so.1 libanl.so.1; do
		echo "/usr/lib/x86_64-linux-gnu/$l" >>"$list"
	done
	sort -u -o "$list" "$list"
	mkdir -p "$dir"
	# Keep links and what they name.
	(cd "$rootfs" && while read -r p; do
		# Follow each link in the rootfs (relative or absolute, as alternatives make them).
		for _ in 1 2 3 4 5; do
			echo "${p#/}"
			[ -L "./$p" ] || break
			t=$(readlink "./$p")
			case $t in /*) p=$t ;; *) p=$(realpath -m -s "$(dirname "$p")/$t") ;; esac
		done
	done <"$list" | sort -u | tar -cf - --files-from=-) | tar -xf - -C "$dir"
	rm -f "$list"
	# The merged-/usr links, the users, and the jail's marker so the entrypoint accepts it.
	for l in bin sbin lib lib64; do [ -L "$rootfs/$l" ] && cp -a "$rootfs/$l" "$dir/$l"; done
	mkdir -p "$dir/etc/slurm" "$dir/var/spool/slurmd" "$dir/run" "$dir/tmp" "$dir/usr/local/bin"
	chmod 1777 "$dir/tmp"
	cp "$rootfs/etc/passwd" "$rootfs/etc/group" "$dir/etc/"
	cp "$out/jail-cudacheck" "$dir/usr/local/bin/cudacheck"
	touch "$dir/$marker"
}

progs=(/usr/sbin/slurmd /usr/bin/bash /usr/bin/sh /usr/bin/dash /usr/bin/ls /usr/bin/cat
	/usr/bin/env /usr/bin/readlink /usr/bin/id /usr/bin/hostname /usr/bin/uname /usr/bin/grep
	/usr/bin/head /usr/bin/tail /usr/bin/sed /usr/bin/timeout
	/usr/bin/sort /usr/bin/uniq /usr/bin/paste /usr/bin/tr /usr/bin/awk /usr/bin/date /usr/bin/dmesg
	/usr/bin/rm /usr/bin/mkdir)
slim_jail "$(hack/slurm-rootfs.sh)" "$out/jail" /usr/lib/x86_64-linux-gnu/slurm-wlm "${progs[@]}"

# The GPU active checks, as the operator submits them; scontrol only records the job comment the
# operator would read.
go run ./test/gpu/checkscripts "$out/jail/usr/local/bin" >/dev/null
printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>/tmp/scontrol.log\n' >"$out/jail/usr/local/bin/scontrol"
chmod +x "$out/jail/usr/local/bin/scontrol"

# The worker image's Slurm (its bundle) and a jail without Slurm to show it in, as in a pod.
read -r _ worker < <(IMAGES=worker hack/images.sh | grep ' /.*/worker-')
layout_manifest=$(jq -r '.manifests[0].digest' "$worker/index.json" | cut -d: -f2)
mkdir -p "$out/image"
for layer in $(jq -r '.layers[].digest' "$worker/blobs/sha256/$layout_manifest" | cut -d: -f2); do
	tar -xzf "$worker/blobs/sha256/$layer" -C "$out/image" opt/slurm-operator 2>/dev/null || true
done
mv "$out/image/opt/slurm-operator/slurm" "$out/slurm-bundle" && rm -rf "$out/image"
echo "worker image $worker: Slurm $(cat "$out/slurm-bundle/version")"
slim_jail "$(hack/slurm-rootfs.sh)" "$out/jail-image" "" /usr/bin/bash /usr/bin/sh /usr/bin/ls /usr/bin/cat \
	/usr/bin/grep /usr/bin/head /usr/bin/tail /usr/bin/sed /usr/bin/timeout /usr/bin/readlink

# EXTRA_BUNDLES="NAME=ROOTFS ..." bundles the Slurm packages installed in each root file system
# (as an image of that release would) and shows them in a copy of that jail, jail-image-NAME.
for extra in ${EXTRA_BUNDLES:-}; do
	go run ./cmd/slurm-bundle --root "${extra#*=}" --out "$out/slurm-bundle-${extra%%=*}"
	cp -a "$out/jail-image" "$out/jail-image-${extra%%=*}"
done

# EXTRA_JAILS="NAME=ROOTFS ..." makes a slim jail jail-NAME from each root file system where
# Debian's Slurm packages are installed (another release, the NVML plugin from contrib).
for extra in ${EXTRA_JAILS:-}; do
	slim_jail "${extra#*=}" "$out/jail-${extra%%=*}" /usr/lib/x86_64-linux-gnu/slurm-wlm \
		/usr/sbin/slurmd /usr/bin/bash /usr/bin/sh /usr/bin/ls /usr/bin/cat /usr/bin/grep \
		/usr/bin/head /usr/bin/tail /usr/bin/sed /usr/bin/timeout /usr/bin/readlink
done
# One compressed file travels in a fraction of the size (check.sh unpacks it where .gpu-check/ is
# missing).
tar -cJf "$out.tar.xz" "$out"
du -sh "$out" "$out"/jail* "$out.tar.xz"
