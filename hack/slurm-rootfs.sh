#!/usr/bin/env bash
# Builds a Debian 13 (trixie) root file system with Slurm, munge and MariaDB, for the
# real-Slurm tests (test/slurmharness). The result is cached outside the clone, keyed by
# ROOTFS_VERSION below: bump it whenever the package list or the recipe changes.
#
#   hack/slurm-rootfs.sh                        build if missing, print the folder on stdout
#   hack/slurm-rootfs.sh --print-dir            print the folder only (nothing is built or checked)
#   hack/slurm-rootfs.sh --release 26.05 [...]  the same with another Slurm release
#
# Releases: 24.11 is Debian 13's own Slurm. 26.05 is Debian sid's binary packages installed on
# Debian 13: only the Slurm packages and the few libraries they need newer versions of come
# from sid (apt's pkg/suite form), everything else stays Debian 13's, as in the images.
#
# The Debian mirror is read from this machine's apt sources (the URI that serves the host's
# own release), or taken from SLURM_ROOTFS_MIRROR. Needs root (debootstrap, chroot).
# Mounts are only ever made inside private mount namespaces, so an interrupted build leaves
# nothing mounted; it leaves only a temporary folder that the next build removes.
set -euo pipefail

SUITE=trixie
SLURM_PACKAGES=(slurmctld slurmd slurmdbd slurmrestd slurm-client slurm-wlm-jwt-plugin slurm-wlm-mysql-plugin)
OTHER_PACKAGES=(munge mariadb-server openssh-server iproute2 procps openmpi-bin python3-mpi4py)

RELEASE=24.11
PRINT_DIR=
while [ $# -gt 0 ]; do
	case $1 in
	--print-dir) PRINT_DIR=1 ;;
	--release) RELEASE=${2:?--release needs a value}; shift ;;
	-h | --help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) echo "usage: $0 [--release 24.11|26.05] [--print-dir]" >&2; exit 2 ;;
	esac
	shift
done
case $RELEASE in
24.11) ROOTFS_VERSION=trixie-slurm-24.11-v2 SLURM_SUITE= ;;
# sid's Slurm needs sid's hwloc, and Open MPI's hwloc plugins must then match it.
26.05) ROOTFS_VERSION=trixie-slurm-26.05-v1 SLURM_SUITE=sid SLURM_PACKAGES+=(libhwloc-plugins libze1) ;;
*) echo "slurm-rootfs: no recipe for Slurm $RELEASE (24.11, 26.05)" >&2; exit 2 ;;
esac
PACKAGES=("${SLURM_PACKAGES[@]}" "${OTHER_PACKAGES[@]}")
INSTALL=("${OTHER_PACKAGES[@]}")
for p in "${SLURM_PACKAGES[@]}"; do INSTALL+=("$p${SLURM_SUITE:+/$SLURM_SUITE}"); done
CACHE=${SLURM_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-operator}
OUT=$CACHE/rootfs/$ROOTFS_VERSION

T0=$(date +%s.%N)
elapsed() { awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN { printf "%.1fs", a - b }'; }
log() { echo "slurm-rootfs: [$(elapsed)] $*" >&2; }
die() { log "error: $*"; exit 1; }

[ -z "$PRINT_DIR" ] || { echo "$OUT"; exit 0; }

if [ -d "$OUT" ]; then
	log "cached $ROOTFS_VERSION, nothing to do"
	echo "$OUT"
	exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot need it)"

. "$(dirname "$0")/lib.sh"

MIRROR=${SLURM_ROOTFS_MIRROR:-$(debian_mirror || true)}
[ -n "$MIRROR" ] || die "no Debian mirror found in the apt sources; set SLURM_ROOTFS_MIRROR"

if ! command -v debootstrap >/dev/null; then
	log "installing debootstrap"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null 2>&1; then
		log "apt-get install failed, running apt-get update first"
		apt-get update -q >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
	fi
fi

mkdir -p "$CACHE/rootfs"
# One build at a time: a second caller waits here and then finds the result.
exec 9>"$CACHE/rootfs/.$ROOTFS_VERSION.lock"
flock 9
if [ -d "$OUT" ]; then
	log "built by another process while waiting"
	echo "$OUT"
	exit 0
fi

# mounted_under DIR: is anything mounted at or below DIR in this mount namespace?
mounted_under() { awk -v d="$1" '$5 == d || index($5, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; }
remove_tmp() {
	local d=$1
	[ -e "$d" ] || return 0
	if mounted_under "$d"; then
		log "warning: something is mounted under $d, not removing it"
		return 0
	fi
	rm -rf --one-file-system "$d"
}

# Leftovers of interrupted builds (we hold the lock, so nobody is using them).
for old in "$CACHE/rootfs/.$ROOTFS_VERSION.tmp."*; do
	[ -e "$old" ] && { log "removing leftover $old"; remove_tmp "$old"; }
done

TMP=$(mktemp -d "$CACHE/rootfs/.$ROOTFS_VERSION.tmp.XXXXXX")
LOGFILE=$TMP.log
trap 'rc=$?; remove_tmp "$TMP"; [ $rc = 0 ] && rm -f "$LOGFILE"; exit $rc' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
chmod 755 "$TMP"

script=$SUITE
[ -e "/usr/share/debootstrap/scripts/$SUITE" ] || script=/usr/share/debootstrap/scripts/sid

log "debootstrap --variant=minbase $SUITE from $MIRROR (log: $LOGFILE)"
# debootstrap mounts /proc and /sys in the target while it works: keep those mounts private.
if ! unshare --mount --propagation private -- \
	debootstrap --variant=minbase "$SUITE" "$TMP" "$MIRROR" "$script" >"$LOGFILE" 2>&1; then
	tail -n 20 "$LOGFILE" >&2
	die "debootstrap failed (full log: $LOGFILE)"
fi
log "debootstrap done"

# Nothing may start a service in the chroot, now or later.
printf '#!/bin/sh\nexit 101\n' >"$TMP/usr/sbin/policy-rc.d"
chmod 755 "$TMP/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$TMP/etc/resolv.conf"
if [ -n "$SLURM_SUITE" ]; then
	# A rolling suite's Release file has a short Valid-Until; the mirror may serve an older
	# one. Low priority: nothing comes from it unless asked for by name.
	echo "deb [check-valid-until=no] $MIRROR $SLURM_SUITE main" >"$TMP/etc/apt/sources.list.d/$SLURM_SUITE.list"
	printf 'Package: *\nPin: release n=%s\nPin-Priority: 100\n' "$SLURM_SUITE" >"$TMP/etc/apt/preferences.d/$SLURM_SUITE"
fi

log "apt-get install ${INSTALL[*]}"
if ! unshare --mount --propagation private -- sh -c '
	set -e
	mount -t proc proc "$1/proc"
	root=$1; shift
	chroot "$root" apt-get update -q
	chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
	chroot "$root" apt-get clean
' sh "$TMP" "${INSTALL[@]}" >>"$LOGFILE" 2>&1; then
	tail -n 20 "$LOGFILE" >&2
	die "apt-get install failed (full log: $LOGFILE)"
fi
log "apt-get install done"

# The test hosts have no DNS: an empty resolv.conf makes unknown names fail at once.
echo '# no DNS: names come from /etc/hosts' >"$TMP/etc/resolv.conf"
{
	echo "$ROOTFS_VERSION"
	chroot "$TMP" dpkg-query -W -f '${Package}=${Version}\n' "${PACKAGES[@]}"
	# Which installed packages only the Slurm suite serves (apt-cache policy: the installed
	# version is the one marked ***, followed by the sources that serve it).
	[ -z "$SLURM_SUITE" ] || chroot "$TMP" sh -c "apt-cache policy \$(dpkg-query -W -f '\${Package} ')" 2>/dev/null |
		awk -v s=" $SLURM_SUITE/" -v b=" $SUITE/" -v name="$SLURM_SUITE" '
			function done() { if (inst && ins && !inb) print "from " name ": " p " " v; inst = 0 }
			/^[^ ]/ { done(); p = $1; sub(/:$/, "", p) }
			/^ \*\*\* / { done(); inst = 1; ins = 0; inb = 0; v = $2; next }
			/^     [^ ]/ { done() }
			inst && index($0, s) { ins = 1 }
			inst && index($0, b) { inb = 1 }
			END { done() }'
} >"$TMP/etc/slurm-rootfs-version"
rm -rf "$TMP/var/lib/apt/lists/"*
log "versions: $(grep -E '^(slurmctld|munge|mariadb-server)=' "$TMP/etc/slurm-rootfs-version" | paste -sd' ')"

mv -T "$TMP" "$OUT"
log "built $OUT ($(du -sh "$OUT" | cut -f1))"
# Older versions are of no more use (one still mounted by a running test is left).
for old in "$CACHE/rootfs/"trixie-slurm-"$RELEASE"-*; do
	[ "$old" = "$OUT" ] || { log "removing $old"; remove_tmp "$old"; }
done
echo "$OUT"
