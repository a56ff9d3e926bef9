#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU, as root, after test/gpu/bundle.sh prepared .gpu-check/
# elsewhere. It answers, against the real driver, what the stand-ins of the node test cannot:
# where the driver's files are in a GPU container, whether the jail entrypoint shows them to the
# jail (nvidia-smi, CUDA and NVML loaded by soname from inside the chroot), what slurmd finds
# of the hardware, which gres.conf AutoDetect modes the jail's slurmd can use (with NVML and
# MIG when bundle.sh made jail-nvml), and what the operator's GPU active checks find.
# Everything it prints also goes to $OUT/gpu-check.log.
set -u
b=$(cd "$(dirname "$0")/../.." && pwd)/.gpu-check
[ -d "$b" ] || [ ! -f "$b.tar.xz" ] || tar -xJf "$b.tar.xz" -C "$(dirname "$b")"
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
exec > >(tee "$out/gpu-check.log") 2>&1
section() { printf '\n===== %s\n' "$*"; }

section "the machine"
uname -a; nproc; grep -m1 'model name' /proc/cpuinfo
cat /proc/driver/nvidia/version 2>&1 | head -2
ls -l /dev/nvidia* 2>&1
command -v nvidia-smi && nvidia-smi -L
env | grep -i -E 'nvidia|cuda|ld_library' || true

section "where the driver's files are"
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /lib64 /usr/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/nvidia/bin /usr/bin; do
	ls -l "$d" 2>/dev/null | grep -E 'libcuda\.so|libnvidia-ml|nvidia-smi' | sed "s|^|$d: |"
done
find / -xdev \( -name 'libnvidia-ml.so*' -o -name 'libcuda.so*' \) 2>/dev/null | head -20
grep -c . /proc/self/mountinfo; grep -i nvidia /proc/self/mountinfo | head -20


# new_jail SRC DST: a copy of a prepared slim jail with a one-node slurm.conf (auth/slurm with a
# throwaway key, so no munged is needed to ask slurmd what it finds) and the workers' cgroup.conf.
new_jail() {
	rm -rf "$2" && cp -a "$1" "$2"
	cat >"$2/etc/slurm/slurm.conf" <<'CONF'
ClusterName=gpucheck
SlurmctldHost=localhost
GresTypes=gpu
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdSpoolDir=/var/spool/slurmd
AuthType=auth/slurm
CredType=cred/slurm
SlurmUser=root
NodeName=gpu0 Gres=gpu:1 State=UNKNOWN
PartitionName=all Nodes=ALL Default=YES
CONF
	# As rendered for workers: no systemd in a pod.
	printf 'CgroupPlugin=autodetect\nIgnoreSystemd=yes\n' >"$2/etc/slurm/cgroup.conf"
	head -c 1024 /dev/urandom >"$2/etc/slurm/slurm.key" && chmod 600 "$2/etc/slurm/slurm.key"
}
# in_jail DIR SCRIPT: runs SCRIPT (a shell script's text) in the jail through the entrypoint. A
# jail named jail-image has no Slurm: the worker image's Slurm bundle is shown in it, as in a pod
# (jail-image-NAME: bundle.sh's EXTRA_BUNDLES).
in_jail() {
	printf '%s\n' "$2" >"$1/usr/local/bin/in-jail.sh" && chmod +x "$1/usr/local/bin/in-jail.sh"
	local bundle=/nonexistent
	case ${1##*/} in jail-image*) bundle=$b/slurm-bundle${1##*/jail-image} ;; esac
	if command -v unshare >/dev/null; then
		unshare -m --propagation private -- "$b/slurm-jail-exec" --jail "$1" --slurm-bundle "$bundle" -- /usr/local/bin/in-jail.sh
		echo "jail-exec rc=$?"
	else
		echo "no unshare here: the jail entrypoint cannot be tried without touching the host's mounts"
	fi
}
# The gres.conf AutoDetect modes, each asked of slurmd -G.
autodetect='
for mode in $MODES; do
	echo "--- gres.conf AutoDetect=$mode"
	if [ $mode = off ]; then
		printf "AutoDetect=off\nNodeName=gpu0 Name=gpu File=/dev/nvidia0\n" >/etc/slurm/gres.conf
	else
		printf "AutoDetect=%s\n" $mode >/etc/slurm/gres.conf
	fi
	timeout 60 slurmd -N gpu0 -G -vv 2>&1 | grep -v -E "debug[23]?:.*(plugin|Reading)" | tail -25
	echo "rc=$?"
done'

section "slurmd's view of the hardware, in the jail"
new_jail "$b/jail" /tmp/jail
in_jail /tmp/jail '#!/bin/sh
echo "--- nvidia-smi in the jail: $(readlink /usr/bin/nvidia-smi)"
nvidia-smi -L
echo "--- the jail'"'"'s driver links"
ls -l /usr/lib/x86_64-linux-gnu/ | grep -E "libcuda|libnvidia-ml"
ls -l /run/slurm-operator/nvidia/lib | head -20
echo "--- CUDA and NVML by soname"
/usr/local/bin/cudacheck; echo "cudacheck rc=$?"
echo "--- slurmd -C"
slurmd -C
MODES="off nvidia nvml"'"$autodetect"

section "the operator's GPU active checks, in the jail, as their Slurm jobs run them"
# run_checks prints what each check printed, its exit status and the job comment it left (what
# the operator reads).
run_checks='
for c in /usr/local/bin/check-*; do
	rm -f /tmp/scontrol.log
	echo "--- ${c##*/}"
	SLURM_JOB_ID=1 SLURM_JOB_NODELIST=gpu0 "$c"
	echo "exit $?; comment: $(sed -n "s/.*comment=//p" /tmp/scontrol.log)"
done'
in_jail /tmp/jail '#!/bin/bash
echo "--- what gpu-errors reads"
nvidia-smi --query-gpu=index,name,ecc.mode.current,ecc.errors.uncorrected.volatile.total --format=csv
nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv
dmesg --since -60min >/dev/null && echo "the kernel log is readable in the jail" || echo "the kernel log is not readable in the jail"
'"$run_checks"
# A planted Xid 79 in the kernel log (the machine is thrown away after the check): the same check
# must now fail, naming it.
if command -v nvidia-smi >/dev/null && echo 'NVRM: Xid (PCI:0000:00:00): 79, pid=0, name=gpu-check, GPU has fallen off the bus (planted by test/gpu/check.sh).' >/dev/kmsg 2>/dev/null; then
	echo "--- an Xid 79 planted in the kernel log"
	in_jail /tmp/jail '#!/bin/bash
rm -f /tmp/scontrol.log
SLURM_JOB_ID=2 /usr/local/bin/check-gpu-errors
echo "exit $?; comment: $(sed -n "s/.*comment=//p" /tmp/scontrol.log)"'
else
	echo "--- no GPU, or /dev/kmsg is not writable here: no Xid planted"
fi

# nvml_jails GRES runs slurmd -G with AutoDetect=nvml in the jail with the worker image's Slurm
# and in every extra jail (bundle.sh's EXTRA_JAILS), the node's gres typed as the operator
# renders it (internal/gpu/testdata: h200 for a whole H200, the profile for MIG devices).
nvml_jails() {
	local j
	for j in "$b"/jail-*; do
		[ -d "$j" ] || continue
		echo "----- ${j##*/jail-}"
		new_jail "$j" "/tmp/${j##*/}"
		sed -i "s/Gres=gpu:1/Gres=$1/" "/tmp/${j##*/}/etc/slurm/slurm.conf"
		in_jail "/tmp/${j##*/}" '#!/bin/sh
slurmd -V
slurmd -C | head -1
MODES=nvml'"$autodetect"
	done
}
section "the pod's own GPU: NVIDIA_VISIBLE_DEVICES as the device plugin sets it, to the jail's /dev and gres lines"
# As a worker's entrypoint runs with --gpus: the UUID (the NVIDIA plugin's default), an index,
# "all", and a UUID the driver does not know (the entrypoint must refuse it). The gres lines go
# to the jail's /tmp, and slurmd -G reads them through gres.conf's Include, as rendered.
uuid=$(nvidia-smi -L 2>/dev/null | sed -n 's/.*(UUID: \(GPU-[^)]*\)).*/\1/p' | head -1)
new_jail "$b/jail" /tmp/jail-own
printf '%s\n' '#!/bin/sh
echo "jail /dev: $(ls /dev | grep "^nvidia" | tr "\n" " ")"
nvidia-smi -L
cat /tmp/own-gres.conf
printf "AutoDetect=off\nInclude /tmp/own-gres.conf\n" >/etc/slurm/gres.conf
sed -i "s/Gres=gpu:1/Gres=gpu:h200:1/" /etc/slurm/slurm.conf
timeout 60 slurmd -N gpu0 -G 2>&1 | tail -5' >/tmp/jail-own/usr/local/bin/in-jail.sh
chmod +x /tmp/jail-own/usr/local/bin/in-jail.sh
for v in "$uuid" 0 all GPU-00000000-0000-0000-0000-000000000000; do
	echo "--- NVIDIA_VISIBLE_DEVICES=$v"
	rm -f /tmp/own-gres.conf
	NVIDIA_VISIBLE_DEVICES=$v unshare -m --propagation private -- "$b/slurm-jail-exec" --jail /tmp/jail-own --slurm-bundle /nonexistent \
		--gpus 1 --gres-conf /tmp/own-gres.conf --gpu-type h200 -- /usr/local/bin/in-jail.sh
	echo "jail-exec rc=$?"
done

if ls -d "$b"/jail-* >/dev/null 2>&1; then
	section "Debian's gpu/nvml plugin (contrib), in the jail"
	nvml_jails gpu:h200:1
	section "MIG"
	nvidia-smi --query-gpu=mig.mode.current,mig.mode.pending --format=csv
	if timeout 120 nvidia-smi -i 0 -mig 1; then
		nvidia-smi --query-gpu=mig.mode.current,mig.mode.pending --format=csv
		nvidia-smi mig -lgip | head -30
		p=$(nvidia-smi mig -lgip | awk '/MIG 1g\./ {print $5; exit}')
		echo "smallest profile: $p"
		if [ -n "$p" ] && timeout 120 nvidia-smi mig -cgi "$p,$p" -C; then
			nvidia-smi -L
			ls -l /dev/nvidia-caps 2>&1 | head
			nvml_jails gpu:1g.18gb:2
			nvidia-smi mig -dci; nvidia-smi mig -dgi
		fi
		timeout 120 nvidia-smi -i 0 -mig 0
	fi
fi
echo
echo "gpu-check: done"
