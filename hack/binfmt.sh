#!/usr/bin/env bash
# Lets this amd64 machine run arm64 programs: registers QEMU's user-mode emulator for arm64
# (qemu-aarch64, a static program from Debian 13's qemu-user package, pinned by version and
# checksum and kept in the cache) in the kernel's binfmt_misc. Building the Slurm images and the
# jail for arm64 needs it: their RUN steps install Debian packages, whose maintainer scripts are
# arm64 programs.
#
#   hack/binfmt.sh             register it unless arm64 programs already run here; print the
#                              binfmt_misc entry that runs them
#   hack/binfmt.sh --remove    remove the entry this script registers (nothing else)
#   hack/binfmt.sh --check     exit 0 when an enabled entry runs arm64 programs
#
# The entry is registered with the F flag: the kernel opens the emulator once, at registration,
# so it runs arm64 programs in any mount namespace (chroots, BuildKit's containers) without the
# emulator being in their file system. binfmt_misc is the whole machine's: an arm64 program
# anyone starts runs under the emulator while the entry is there. hack/images-push.sh removes
# the entry again when it registered it. Needs root.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

QEMU_VERSION=1:10.0.13+ds-0+deb13u1
QEMU_DEB=pool/main/q/qemu/qemu-user_10.0.13+ds-0+deb13u1_amd64.deb
QEMU_SHA256=ca6ede739327a20ae5a3498230c8a3a9a072c586e131bc6bcc1201eb1725e336
CACHE=${SLURM_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-operator}
EMULATOR=$CACHE/tools/qemu-aarch64-${QEMU_VERSION#*:}
BINFMT=/proc/sys/fs/binfmt_misc
ENTRY=slurm-operator-aarch64
# An ELF header of an arm64 executable (64-bit, little-endian, e_machine 183) and the bits of it
# that matter, as binfmt_misc matches them.
MAGIC='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
MASK='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'

# registered prints the enabled binfmt_misc entries whose magic is an arm64 ELF header.
registered() {
	local f
	for f in "$BINFMT"/*; do
		case ${f##*/} in register | status) continue ;; esac
		grep -qx enabled "$f" 2>/dev/null || continue
		grep -q '^magic 7f454c460201010000000000000000000200b700' "$f" && echo "$f"
	done
	return 0
}

mount_binfmt() {
	[ -e "$BINFMT/register" ] && return 0
	mount -t binfmt_misc binfmt_misc "$BINFMT" ||
		{ echo "binfmt: cannot mount binfmt_misc on $BINFMT (the kernel needs CONFIG_BINFMT_MISC)" >&2; exit 1; }
}

case ${1:-} in
--check)
	[ -e "$BINFMT/register" ] && [ -n "$(registered)" ]
	exit
	;;
--remove)
	[ "$(id -u)" = 0 ] || { echo "binfmt: must run as root" >&2; exit 1; }
	[ -e "$BINFMT/$ENTRY" ] && echo -1 >"$BINFMT/$ENTRY"
	exit 0
	;;
"") ;;
*) echo "usage: $0 [--check|--remove]" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "binfmt: must run as root" >&2; exit 1; }
mount_binfmt
have=$(registered | head -1)
[ -n "$have" ] && { echo "$have"; exit 0; }

if [ ! -x "$EMULATOR" ]; then
	mirror=${SLURM_ROOTFS_MIRROR:-$(debian_mirror || true)}
	[ -n "$mirror" ] || { echo "binfmt: no Debian mirror in the apt sources; set SLURM_ROOTFS_MIRROR" >&2; exit 1; }
	mkdir -p "$CACHE/tools"
	work=$(mktemp -d "$CACHE/tools/.qemu.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	echo "binfmt: fetching qemu-user $QEMU_VERSION" >&2
	curl -fsSL --retry 3 -o "$work/qemu-user.deb" "${mirror%/}/$QEMU_DEB"
	echo "$QEMU_SHA256  $work/qemu-user.deb" | sha256sum -c --quiet ||
		{ echo "binfmt: $QEMU_DEB does not have the pinned checksum" >&2; exit 1; }
	dpkg-deb --fsys-tarfile "$work/qemu-user.deb" | tar -x -C "$work" ./usr/bin/qemu-aarch64
	# Static: it must run with no library of the arm64 root it emulates.
	if LC_ALL=C readelf -d "$work/usr/bin/qemu-aarch64" | grep -q '(NEEDED)'; then
		echo "binfmt: qemu-aarch64 of $QEMU_DEB needs shared libraries; a static one is needed" >&2
		exit 1
	fi
	install -m 0755 "$work/usr/bin/qemu-aarch64" "$EMULATOR"
fi
printf ':%s:M::%s:%s:%s:F\n' "$ENTRY" "$MAGIC" "$MASK" "$EMULATOR" >"$BINFMT/register"
echo "$BINFMT/$ENTRY"
