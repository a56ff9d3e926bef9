package node

import (
	"slices"
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// The scaling steps of the one-node test (the user document's 4.2): up and down while jobs run,
// and past what the node can place.

// checkScaleUpWhileAJobRuns: scale 2 → 3 while a job runs: worker-2 joins idle in seconds and
// nothing restarts.
func (e *env) checkScaleUpWhileAJobRuns() {
	t := e.t
	job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-0 -J long --wrap 'sleep 90'"))
	e.waitJobState(job, "RUNNING")
	before := e.podsSnapshot()
	start := time.Now()
	e.setSize(3)
	// Within 40 s (10 s at most measured): a wait for the kubelet's ConfigMap sync (about a
	// minute) or a node slurmctld dropped would exceed it.
	e.waitFor(40*time.Second, "worker-2 idle", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sinfo -h -n worker-2 -o %t")
		return strings.TrimSpace(out) == "idle", out
	})
	t.Logf("scale-up: kubectl patch to worker-2 idle in sinfo: %.1fs", time.Since(start).Seconds())
	if out := e.onLogin("squeue -h -j " + job + " -o %T; sacct -n -X -P -j " + job + " -o State"); !strings.HasPrefix(out, "RUNNING\n") {
		t.Errorf("the job that ran through the scale-up: %q", out)
	}
	after := e.podsSnapshot()
	for name, was := range before {
		if after[name] != was {
			t.Errorf("pod %s was replaced or restarted: %q, then %q", name, was, after[name])
		}
	}
	// The job holds worker-0's only CPU: end it, then use all three.
	e.onLogin("scancel " + job)
	e.waitFor(time.Minute, "worker-0 idle", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sinfo -h -n worker-0 -o %t")
		return strings.TrimSpace(out) == "idle", out
	})
	if out := e.onLogin("srun -N3 hostname 2>&1 | sort"); strings.TrimSpace(out) != cluster+"-worker-0\n"+cluster+"-worker-1\n"+cluster+"-worker-2" {
		t.Errorf("srun -N3 hostname:\n%s", out)
	}
}

// checkScaleDownWhileAJobRuns: scale 3 → 2 while a job runs on worker-2: drained, the job
// completes, then the node leaves sinfo and the StatefulSet shrinks.
func (e *env) checkScaleDownWhileAJobRuns() {
	t := e.t
	job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-2 -J leaving --wrap 'sleep 20'"))
	e.waitJobState(job, "RUNNING")
	start := time.Now()
	e.setSize(2)
	e.waitFor(time.Minute, "worker-2 draining for the scale-down", func() (bool, string) {
		state, reason := e.slurmState("worker-2")
		return strings.Contains(state, "DRAIN") && reason == slurmfacts.DrainScaleDown, state + " " + reason
	})
	if out := e.kubectlOK("get", "statefulset", cluster+"-worker", "-n", ns, "-o", "jsonpath={.spec.replicas}"); out != "3" {
		t.Errorf("the StatefulSet shrank to %s while worker-2 runs a job", out)
	}
	e.waitFor(2*time.Minute, "job "+job+" COMPLETED", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+job+" -o State,ExitCode")
		return strings.TrimSpace(out) == "COMPLETED|0:0", out
	})
	ended := time.Now()
	e.waitFor(2*time.Minute, "worker-2 gone from sinfo and the StatefulSet at 2", func() (bool, string) {
		nodes, _ := e.sshErr(e.login, "sinfo -h -N -o '%N %t' | sort -u")
		replicas, _ := e.kubectl("get", "statefulset", cluster+"-worker", "-n", ns, "-o", "jsonpath={.spec.replicas}")
		return strings.TrimSpace(nodes) == "worker-0 idle\nworker-1 idle" && replicas == "2", nodes + replicas
	})
	t.Logf("scale-down: kubectl patch to the shrink %.1fs, of which %.1fs after the job ended", time.Since(start).Seconds(), time.Since(ended).Seconds())
	e.waitWorkerPodsStopped(ended, cluster+"-worker-0", cluster+"-worker-1")
}

// checkScalePastWhatFits: scale 2 → 4 → 2 where only three fit: worker-3 is reported Pending with
// the scheduler's reason, then both leave at once; the job on worker-1 completes.
func (e *env) checkScalePastWhatFits() {
	t := e.t
	job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-1 -J meanwhile --wrap 'sleep 45'"))
	e.waitJobState(job, "RUNNING")
	e.setSize(4)
	e.waitFor(time.Minute, "worker-3 reported as a pod that cannot start", func() (bool, string) {
		out, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="WorkersAvailable")].reason} {.status.conditions[?(@.type=="WorkersAvailable")].message}`)
		return strings.HasPrefix(out, "WorkerPodsPending ") && strings.Contains(out, "pod "+cluster+"-worker-3 (Slurm node worker-3) cannot start: Unschedulable: "), out
	})
	if out := e.kubectlOK("get", "events", "-n", ns, "--field-selector", "reason=WorkerPodPending", "-o", "jsonpath={.items[*].note}{.items[*].message}"); !strings.Contains(out, cluster+"-worker-3") {
		t.Errorf("no WorkerPodPending event names worker-3: %q", out)
	}
	start := time.Now()
	e.setSize(2)
	e.waitFor(time.Minute, "two workers, in sinfo and the StatefulSet", func() (bool, string) {
		nodes, _ := e.sshErr(e.login, "sinfo -h -N -o %N | sort -u")
		replicas, _ := e.kubectl("get", "statefulset", cluster+"-worker", "-n", ns, "-o", "jsonpath={.spec.replicas}")
		return strings.TrimSpace(nodes) == "worker-0\nworker-1" && replicas == "2", nodes + replicas
	})
	t.Logf("scale 4 → 2 past a Pending worker: %.1fs to two workers", time.Since(start).Seconds())
	e.waitFor(2*time.Minute, "job "+job+" COMPLETED", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+job+" -o State,ExitCode")
		return strings.TrimSpace(out) == "COMPLETED|0:0", out
	})
	e.waitWorkerPodsStopped(start, cluster+"-worker-0", cluster+"-worker-1")
}

// waitWorkerPodsStopped waits until the worker pods are exactly keep: the StatefulSet deletes the
// others at once, and the kubelet stops each within its grace period (the preStop waits for
// jobs only while slurmctld lists some on the node). A stop that takes over a minute is logged
// with where each pod was in it.
func (e *env) waitWorkerPodsStopped(since time.Time, keep ...string) {
	t := e.t
	t.Helper()
	want := "pod/" + strings.Join(keep, "\npod/")
	e.waitFor(time.Minute, "the leaving worker pods deleted", func() (bool, string) {
		out, _ := e.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=worker", "-o",
			`jsonpath={range .items[*]}{.metadata.name}{" "}{.metadata.deletionTimestamp}{"\n"}{end}`)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 1 && !slices.Contains(keep, f[0]) {
				return false, out
			}
		}
		return true, out
	})
	var slow string
	e.waitFor(time.Duration(worker.TerminationGracePeriodSeconds+30)*time.Second, "the leaving worker pods gone", func() (bool, string) {
		out, _ := e.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=worker", "-o", "name")
		if strings.TrimSpace(out) == want {
			return true, ""
		}
		if slow == "" && time.Since(since) > time.Minute {
			slow = e.stoppingPods()
		}
		return false, out + e.stoppingPods()
	})
	if slow != "" {
		t.Logf("the leaving worker pods took %.0fs to stop; a minute in:%s", time.Since(since).Seconds(), slow)
	}
}

// stoppingPods tells, for a wait on pods to go, where each worker pod is in its stop: when it
// was deleted, its containers' states, and its events (a preStop hook that failed or ran long,
// a container killed at the end of the grace period).
func (e *env) stoppingPods() string {
	out, _ := e.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=worker", "-o",
		`jsonpath={range .items[*]}{.metadata.name} deleted={.metadata.deletionTimestamp} phase={.status.phase}{range .status.initContainerStatuses[*]} {.name}={.state}{end}{range .status.containerStatuses[*]} {.name}={.state}{end}{"\n"}{end}`)
	events, _ := e.kubectl("get", "events", "-n", ns, "--sort-by=.lastTimestamp", "-o",
		`jsonpath={range .items[?(@.involvedObject.kind=="Pod")]}{.lastTimestamp} {.involvedObject.name} {.reason}: {.message}{"\n"}{end}`)
	var mine []string
	for _, line := range strings.Split(events, "\n") {
		if strings.Contains(line, cluster+"-worker-") {
			mine = append(mine, line)
		}
	}
	if len(mine) > 30 {
		mine = mine[len(mine)-30:]
	}
	return "\n" + out + "events:\n" + strings.Join(mine, "\n")
}
