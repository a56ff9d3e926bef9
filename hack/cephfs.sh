#!/usr/bin/env bash
# A real CephFS on this machine, for a jail on a network file system: one monitor, one OSD
# (BlueStore on a sparse file), one MDS, from Debian's packages, mounted with ceph-fuse (the
# kernel here has no NFS and no CephFS client; FUSE it has). Every node of hack/node.sh shares
# this machine's mounts, so the mount is each node's view of the file system, as a site's
# CephFS CSI driver would give it to each node.
#
#   hack/cephfs.sh up        start it and mount it; prints the mount's path
#   hack/cephfs.sh squashed  mount it a second time with a client whose root is squashed
#                            (the MDS refuses root's writes); prints that mount's path
#   hack/cephfs.sh stop-mds  stop the metadata server (file system calls wait)
#   hack/cephfs.sh start-mds start it again
#   hack/cephfs.sh down      unmount, stop everything, remove its folder
#
# Everything lives under $CEPHFS_DIR (default /tmp/slurm-operator-cephfs).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
D=${CEPHFS_DIR:-/tmp/slurm-operator-cephfs}
case $D in
/ | /tmp | /tmp/ | /root | /home | /var | /usr | /etc | "") echo "cephfs: CEPHFS_DIR=$D is not a folder of its own" >&2; exit 2 ;;
esac
CONF=$D/ceph.conf
IP=127.0.0.1
export CEPH_CONF=$CONF

log() { echo "cephfs: $*" >&2; }
ceph_() { ceph -c "$CONF" -k "$D/admin.keyring" -n client.admin --connect-timeout 20 "$@"; }
alive() { pid_alive "$D/$1.pid"; }
start() {
	local n=$1
	shift
	"$@" >"$D/log/$n.out" 2>&1 &
	echo $! >"$D/$n.pid"
}
stop() { pid_stop "$D/$1.pid"; }
wait_for() {
	local what=$1 tries=$2 i
	shift 2
	for i in $(seq 1 "$tries"); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 1
	done
	log "$what did not come up; its log ends with:"
	tail -n 30 "$D/log/$what.out" "$D/log/"*"$what"*.log 2>/dev/null >&2 || true
	return 1
}

up() {
	[ "$(id -u)" = 0 ] || { log "must run as root"; exit 1; }
	if alive mon; then log "already up"; echo "$D/mnt"; return 0; fi
	[ -e /dev/fuse ] || { log "no /dev/fuse"; exit 1; }
	need_debs ceph-mon ceph-osd ceph-mds ceph-fuse ceph-common
	[ ! -d "$D" ] || down
	mkdir -p "$D"/{log,run,mon,osd,mds,mnt}
	local fsid
	fsid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$CONF" <<CONF
[global]
fsid = $fsid
mon_host = [v2:$IP:3300,v1:$IP:6789]
run_dir = $D/run
log_file = $D/log/\$name.log
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
auth_allow_insecure_global_id_reclaim = false
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
mon_data_avail_crit = 1
[mon]
mon_data = $D/mon
[osd]
osd_data = $D/osd
osd_objectstore = bluestore
bluestore_block_create = true
bluestore_block_size = 21474836480
osd_memory_target = 1073741824
[mds]
mds_data = $D/mds
mds_cache_memory_limit = 268435456
CONF
	ceph-authtool --create-keyring "$D/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	ceph-authtool --create-keyring "$D/admin.keyring" --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
	ceph-authtool "$D/mon.keyring" --import-keyring "$D/admin.keyring" >/dev/null
	monmaptool --create --clobber --fsid "$fsid" --addv a "[v2:$IP:3300,v1:$IP:6789]" "$D/monmap" >/dev/null
	ceph-mon -c "$CONF" --mkfs -i a --monmap "$D/monmap" --keyring "$D/mon.keyring" >/dev/null
	start mon ceph-mon -c "$CONF" -i a -f
	wait_for mon 60 ceph_ -s

	local uuid key
	uuid=$(cat /proc/sys/kernel/random/uuid)
	key=$(ceph-authtool --gen-print-key)
	echo "{\"cephx_secret\": \"$key\"}" >"$D/osd-new.json"
	ceph_ osd new "$uuid" -i "$D/osd-new.json" >/dev/null
	ceph-osd -c "$CONF" -i 0 --mkfs --key "$key" --osd-uuid "$uuid" >/dev/null 2>"$D/log/osd-mkfs.out"
	printf '[osd.0]\n\tkey = %s\n' "$key" >"$D/osd/keyring"
	start osd ceph-osd -c "$CONF" -i 0 -f --keyring "$D/osd/keyring"
	wait_for osd 120 sh -c "ceph -c '$CONF' -k '$D/admin.keyring' osd stat | grep -q '1 up'"

	ceph_ auth get-or-create mds.a mon 'allow profile mds' osd 'allow rw tag cephfs *=*' mds 'allow' mgr 'allow profile mds' >"$D/mds/keyring"
	start mds ceph-mds -c "$CONF" -i a -f --keyring "$D/mds/keyring"
	ceph_ osd pool create cephfs_metadata 8 >/dev/null
	ceph_ osd pool create cephfs_data 8 >/dev/null
	ceph_ fs new cephfs cephfs_metadata cephfs_data >/dev/null
	ceph_ fs set cephfs standby_count_wanted 0 >/dev/null
	wait_for mds 120 sh -c "ceph -c '$CONF' -k '$D/admin.keyring' mds stat | grep -q 'up:active'"

	ceph_ fs authorize cephfs client.jail / rw >"$D/jail.keyring"
	mount_client jail mnt
	log "up: CephFS mounted at $D/mnt"
	echo "$D/mnt"
}

# mount_client CLIENT DIR mounts the file system's root at $D/DIR as client.CLIENT.
mount_client() {
	mkdir -p "$D/$2"
	start "fuse-$2" ceph-fuse -c "$CONF" -k "$D/$1.keyring" -n "client.$1" -f "$D/$2"
	wait_for "fuse-$2" 60 sh -c "grep -q ' $D/$2 fuse' /proc/self/mounts"
}

squashed() {
	alive mon || { log "not up"; exit 1; }
	if ! alive fuse-squashed; then
		ceph_ fs authorize cephfs client.squashed / rw root_squash >"$D/squashed.keyring"
		mount_client squashed squashed
	fi
	echo "$D/squashed"
}

down() {
	[ -d "$D" ] || { log "nothing to stop"; return 0; }
	local m
	for m in $(awk -v d="$D" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		fusermount -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	for m in fuse-squashed fuse-mnt mds osd mon; do stop "$m"; done
	rm -rf --one-file-system "$D"
	log "down"
}

case ${1:-} in
up) up ;;
squashed) squashed ;;
stop-mds) stop mds ;;
start-mds) start mds ceph-mds -c "$CONF" -i a -f --keyring "$D/mds/keyring" ;;
down) down ;;
*) echo "usage: $0 up|squashed|stop-mds|start-mds|down" >&2; exit 2 ;;
esac
