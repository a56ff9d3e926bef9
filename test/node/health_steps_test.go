package node

import (
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// The periodic health checks' steps of the one-node test, with the stand-in nvidia-smi.

// checkHealthDrainsFewerGPUs: a worker that sees fewer GPUs is drained by the health check and
// returns when they are back; an admin's drain stays.
func (e *env) checkHealthDrainsFewerGPUs() {
	t := e.t
	e.onLogin("mkdir -p /etc/stand-in-gpus && echo 0 > /etc/stand-in-gpus/" + cluster + "-worker-1")
	e.waitFor(time.Minute, "worker-1 drained by the health check", func() (bool, string) {
		state, reason := e.slurmState("worker-1")
		return strings.Contains(state, "DRAIN") && strings.HasPrefix(reason, slurmfacts.DrainHealth) && strings.Contains(reason, "0 of 1 GPUs visible"), state + " " + reason
	})
	e.onLogin("rm /etc/stand-in-gpus/" + cluster + "-worker-1")
	e.waitFor(time.Minute, "worker-1 back", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sinfo -h -n worker-1 -o %t")
		return strings.TrimSpace(out) == "idle", out
	})

	e.onLogin(`scontrol update nodename=worker-0 state=drain reason="admin: bad DIMM"`)
	e.onLogin("echo 0 > /etc/stand-in-gpus/" + cluster + "-worker-0")
	time.Sleep(25 * time.Second) // two check intervals
	if state, reason := e.slurmState("worker-0"); !strings.Contains(state, "DRAIN") || reason != "admin: bad DIMM" {
		t.Errorf("while failing its checks, the admin's drained worker-0 is %s %q", state, reason)
	}
	e.onLogin("rm /etc/stand-in-gpus/" + cluster + "-worker-0")
	time.Sleep(25 * time.Second)
	if state, reason := e.slurmState("worker-0"); !strings.Contains(state, "DRAIN") || reason != "admin: bad DIMM" {
		t.Errorf("once healthy, the admin's drained worker-0 is %s %q", state, reason)
	}
	e.onLogin("scontrol update nodename=worker-0 state=resume")
}

// checkHealthDrainsBrokenJail: a worker whose jail turns read-only, or runs short of space, is
// drained naming it and returns when mended.
func (e *env) checkHealthDrainsBrokenJail() {
	drained := func(node, why string) {
		e.waitFor(3*time.Minute, node+" drained: "+why, func() (bool, string) {
			state, reason := e.slurmState(node)
			return strings.Contains(state, "DRAIN") && strings.HasPrefix(reason, slurmfacts.DrainHealth) && strings.Contains(reason, why), state + " " + reason
		})
	}
	idle := func(node string) {
		e.waitFor(3*time.Minute, node+" back", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sinfo -h -n "+node+" -o %t")
			return strings.TrimSpace(out) == "idle", out
		})
	}
	// The jail read-only where slurmd runs it (its own mount namespace, entered from the node).
	pid := strings.Fields(e.sh("", "pgrep", "-f", "slurmd -D -N worker-1 "))[0]
	remount := func(mode string) {
		e.sh("", "nsenter", "-t", pid, "-m", "--", "mount", "-o", "remount,bind,"+mode, "/")
	}
	remount("ro")
	drained("worker-1", "the jail is not writable")
	remount("rw")
	idle("worker-1")
	// Less free space than the spec wants: the kubelet brings the new check to the workers.
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", `{"spec":{"periodicChecks":{"jailMinFreeSpace":"100Pi"}}}`)
	drained("worker-0", "MiB free, less than 107374182400 MiB")
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/periodicChecks/jailMinFreeSpace"}]`)
	idle("worker-0")
	idle("worker-1")
}
