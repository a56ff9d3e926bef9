#!/bin/sh
# A one-node Slurm cluster of the arm64 images, run under the arm64 emulator on this machine:
# munged and slurmd in the arm64 jail (the worker image's Slurm laid over it), slurmctld in the
# arm64 controller image's file system, sharing munged's socket. Run it in its own mount, network,
# PID and UTS namespaces (unshare --mount --net --pid --uts --fork --kill-child), as root:
#   arm64-slurm.sh JAIL CONTROLLER
# It prints "srun: …", "python3: …", "sbatch: …" (what uname -m and Python said in a job step
# and a batch job), "alice srun: …" and "alice sbatch: …" (an ordinary user's name and machine in
# hers) and "node: …" (the node's state after them), and exits non-zero when a step fails.
set -eu
J=$1 C=$2

# A network with one address besides loopback: slurmd and slurmctld bind to the wildcard
# address, which getaddrinfo gives only when the host has an address that is not loopback.
hostname arm64-ctl
ip link set lo up
ip link add v0 type veth peer name v1
ip addr add 10.254.0.1/24 dev v0
ip link set v0 up
ip link set v1 up

for r in "$J" "$C"; do
	mkdir -p "$r/proc" "$r/sys" "$r/dev" "$r/run/munge" "$r/etc/slurm" "$r/var/spool/slurmctld" "$r/var/spool/slurmd" "$r/tmp"
	mount -t proc proc "$r/proc"
	mount --rbind /sys "$r/sys"
	mount --rbind /dev "$r/dev"
	printf '127.0.0.1 localhost arm64-ctl arm64-node\n' >"$r/etc/hosts"
	cat >"$r/etc/slurm/slurm.conf" <<EOF
ClusterName=arm64
SlurmctldHost=arm64-ctl(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
MpiDefault=none
ReturnToService=2
SlurmctldLogFile=/tmp/slurmctld.log
SlurmdLogFile=/tmp/slurmd.log
NodeName=arm64-node NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=all Nodes=ALL Default=YES State=UP
EOF
done
mount -t tmpfs tmpfs "$J/run/munge"
mount --bind "$J/run/munge" "$C/run/munge"

chroot "$J" mungekey -c -f -k /etc/munge/munge.key
chroot "$J" munged --force 2>/dev/null
chroot "$C" slurmctld
chroot "$J" slurmd -N arm64-node
i=0
until chroot "$J" sinfo -h -o %t 2>/dev/null | grep -qx idle; do
	i=$((i + 1))
	if [ $i -gt 90 ]; then
		echo "the node never became idle:"
		chroot "$J" sinfo -N || true
		tail -n 20 "$C/tmp/slurmctld.log" "$J/tmp/slurmd.log"
		exit 1
	fi
	sleep 1
done
trap 'tail -n 20 "$C/tmp/slurmctld.log" "$J/tmp/slurmd.log"' EXIT
# Each step's output is kept first, so that a failed step fails the script (set -e); batch jobs
# are waited for a bounded time.
out=$(chroot "$J" srun -N1 uname -m)
echo "srun: $out"
out=$(chroot "$J" srun -N1 python3 -c 'import platform; print(platform.machine())')
echo "python3: $out"
timeout 120 chroot "$J" sbatch --wait -Q -o /tmp/batch.out --wrap 'uname -m'
echo "sbatch: $(cat "$J/tmp/batch.out")"
# An ordinary user's job step and batch job, from her own login shell: slurmctld resolves her
# (she is in the controller's passwd too, as a site's directory or the jail's users would be
# there), and slurmstepd runs her programs as her under the emulator.
for r in "$J" "$C"; do chroot "$r" useradd --create-home --shell /bin/bash --uid 1000 alice; done
out=$(chroot "$J" su - alice -c 'srun -N1 sh -c "echo \$(id -un) \$(uname -m)"')
echo "alice srun: $out"
timeout 120 chroot "$J" su - alice -c 'sbatch --wait -Q -o batch.out --wrap "id -un; uname -m"'
echo "alice sbatch: $(tr '\n' ' ' <"$J/home/alice/batch.out")"
echo "node: $(chroot "$J" scontrol show node arm64-node | grep -o 'State=[A-Z+]*')"
trap - EXIT
