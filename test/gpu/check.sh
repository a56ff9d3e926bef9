#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU, as root, after test/gpu/bundle.sh prepared .gpu-check/
# elsewhere. It answers, against the real driver, what the stand-ins of the node test cannot:
# where the driver's files are in a GPU container, whether the jail entrypoint shows them to the
# jail (nvidia-smi, CUDA and NVML loaded by soname from inside the chroot), what slurmd finds
# of the hardware, and which gres.conf AutoDetect modes the jail's slurmd can use.
# Everything it prints also goes to $OUT/gpu-check.log.
set -u
b=$(cd "$(dirname "$0")/../.." && pwd)/.gpu-check
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

section "slurmd's view of the hardware, in the jail"
rm -rf /tmp/jail && cp -a "$b/jail" /tmp/jail
cat >/tmp/jail/etc/slurm/slurm.conf <<'CONF'
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
printf 'CgroupPlugin=autodetect\nIgnoreSystemd=yes\n' >/tmp/jail/etc/slurm/cgroup.conf
cat >/tmp/jail/usr/local/bin/in-jail.sh <<'SCRIPT'
#!/bin/sh
echo "--- nvidia-smi in the jail: $(readlink /usr/bin/nvidia-smi)"
nvidia-smi -L
echo "--- the jail's driver links"
ls -l /usr/lib/x86_64-linux-gnu/ | grep -E 'libcuda|libnvidia-ml'
ls -l /run/slurm-operator/nvidia/lib | head -20
echo "--- CUDA and NVML by soname"
/usr/local/bin/cudacheck; echo "cudacheck rc=$?"
echo "--- slurmd -C"
slurmd -C
for mode in off nvidia nvml; do
	echo "--- gres.conf AutoDetect=$mode"
	if [ $mode = off ]; then
		printf 'AutoDetect=off\nNodeName=gpu0 Name=gpu File=/dev/nvidia0\n' >/etc/slurm/gres.conf
	else
		printf 'AutoDetect=%s\n' $mode >/etc/slurm/gres.conf
	fi
	timeout 60 slurmd -N gpu0 -G -vv 2>&1 | grep -v -E 'debug[23]?:.*(plugin|Reading)' | tail -25
	echo "rc=$?"
done
SCRIPT
chmod +x /tmp/jail/usr/local/bin/in-jail.sh
# auth/slurm with a throwaway key, so no munged is needed to ask slurmd what it finds.
head -c 1024 /dev/urandom >/tmp/jail/etc/slurm/slurm.key && chmod 600 /tmp/jail/etc/slurm/slurm.key
if command -v unshare >/dev/null; then
	unshare -m --propagation private -- "$b/slurm-jail-exec" --jail /tmp/jail -- /usr/local/bin/in-jail.sh
	echo "jail-exec rc=$?"
else
	echo "no unshare here: the jail entrypoint cannot be tried without touching the host's mounts"
fi
