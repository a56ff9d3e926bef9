// Package slurmharness starts a real Slurm cluster on one Linux machine, for tests: a
// controller, workers with fake GPUs, login hosts and an optional accounting host (MariaDB
// and slurmdbd), each a "host" with its own network, UTS, mount and cgroup namespaces, all
// running the Debian packages of a root file system built by hack/slurm-rootfs.sh.
//
// It exists so that the configuration the operator renders (slurm.conf, gres.conf,
// cgroup.conf, slurmdbd.conf, ...) is loaded by the real daemons, byte for byte, and so that
// tests can show what a user sees: sinfo, srun, sbatch, sacct, scaling with reconfigure.
//
// How a host is made:
//   - A pause process joins the host's cgroups (created below the test process's own, one
//     folder per Start, named after the test PID and a random suffix), then unshares its
//     namespaces. In its private mount namespace it mounts an overlay of the root file
//     system (so the cached root file system is never written), /proc, /sys with fresh
//     cgroup mounts that show only the host's cgroups (Slurm's slurm_<node> folders stay
//     apart from any other test's), a small /dev with the fake GPUs (character devices,
//     major 195), and private /run, /tmp, /var/spool and /var/log/slurm. /etc/slurm,
//     /etc/munge, /etc/hosts and /shared are shared by every host. It then chroots and
//     sleeps.
//   - Networking is a veth pair per host to a bridge that lives in a network namespace of
//     its own, with addresses in 10.213.47.0/24. No name is made in the host machine's
//     namespaces (no `ip netns`), so concurrent test processes cannot collide.
//   - Commands and daemons enter a host with nsenter (net, mount, UTS, cgroup and root), after
//     joining its cgroups. `ip netns exec` is never used: it remounts /sys, and slurmd then
//     finds no cgroup controllers.
//
// The package must not edit the caller's config bytes, write to the root file system, touch
// the machine's network, or leave anything behind: Stop kills every process (found through
// the cgroups and network namespaces, job steps included) and removes the cgroups and the
// temporary folder. If the test process dies without Stop, its children get SIGKILL
// (Pdeathsig) and a watchdog child cleans the cgroups and the folder; the next Start also
// sweeps what dead test processes left.
//
// It needs root and cgroup v1 controllers under /sys/fs/cgroup (v1 or hybrid, as on the CI
// machines; a pure cgroup v2 machine is refused with a clear error). It is for tests only.
package slurmharness
