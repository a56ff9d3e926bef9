#!/usr/bin/env bash
# Prepares what test/gpu/check.sh needs on a GPU machine that has no network and no Go: a
# slim jail (slurmd and its plugins, a shell and the libraries they load, taken from the
# real-Slurm rootfs), the jail entrypoint, and a program that loads CUDA and NVML the way a
# job does. Everything lands in .gpu-check/ (ignored), small enough to travel.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpu-check
rootfs=$(hack/slurm-rootfs.sh)
rm -rf "$out" && mkdir -p "$out/jail"

CGO_ENABLED=0 go build -o "$out/slurm-jail-exec" ./cmd/slurm-jail-exec
gcc -O2 -o "$out/jail-cudacheck" test/gpu/cudacheck.c -ldl

# The files to copy: programs, slurmd's plugins, and every library they load (ldd in the
# rootfs, so the rootfs's own loader and paths answer).
progs=(/usr/sbin/slurmd /usr/bin/bash /usr/bin/sh /usr/bin/dash /usr/bin/ls /usr/bin/cat
	/usr/bin/env /usr/bin/readlink /usr/bin/id /usr/bin/hostname /usr/bin/uname /usr/bin/grep
	/usr/bin/head /usr/bin/tail /usr/bin/sed /usr/bin/timeout)
mapfile -t plugins < <(cd "$rootfs" && find usr/lib/x86_64-linux-gnu/slurm-wlm -name '*.so' | sed 's|^|/|')
list=$(mktemp)
for f in "${progs[@]}" "${plugins[@]}"; do
	echo "$f"
	chroot "$rootfs" /usr/bin/ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^\t\//{print $1}' || true
done >"$list"
# What the driver's own libraries load (a real jail has all of libc).
for l in libdl.so.2 libpthread.so.0 librt.so.1 libm.so.6 libgcc_s.so.1; do
	echo "/usr/lib/x86_64-linux-gnu/$l" >>"$list"
done
sort -u -o "$list" "$list"
# Keep links and what they name.
(cd "$rootfs" && while read -r p; do
	# Follow each link in the rootfs (relative or absolute, as alternatives make them).
	for _ in 1 2 3 4 5; do
		echo "${p#/}"
		[ -L "./$p" ] || break
		t=$(readlink "./$p")
		case $t in /*) p=$t ;; *) p=$(realpath -m -s "$(dirname "$p")/$t") ;; esac
	done
done <"$list" | sort -u | tar -cf - --files-from=-) | tar -xf - -C "$out/jail"
# The merged-/usr links, the users, and the jail's marker so the entrypoint accepts it.
for l in bin sbin lib lib64; do [ -L "$rootfs/$l" ] && cp -a "$rootfs/$l" "$out/jail/$l"; done
mkdir -p "$out/jail/etc/slurm" "$out/jail/var/spool/slurmd" "$out/jail/run" "$out/jail/tmp" \
	"$out/jail/usr/local/bin"
cp "$rootfs/etc/passwd" "$rootfs/etc/group" "$out/jail/etc/"
cp "$out/jail-cudacheck" "$out/jail/usr/local/bin/cudacheck"
touch "$out/jail/$(sed -n 's/^const MarkerFile = "\(.*\)"$/\1/p' internal/jailexec/jailexec.go)"
du -sh "$out"
