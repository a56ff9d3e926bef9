package node

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// checkActiveChecks turns on two active checks for the running cluster: the MPI all-reduce
// between the workers, across the pod network between their nodes, and the jail's write check,
// both as the operator's batch jobs in the real jail. Both pass on both workers, as the status
// says, and nothing is drained; taken out of the spec, the status forgets them.
func (e *env) checkActiveChecks() {
	e.t.Helper()
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p",
		`{"spec":{"activeChecks":[{"name":"mpi","program":"MPIAllReduce","timeoutSeconds":120},{"name":"jail","program":"JailWritable","timeoutSeconds":60}]}}`)
	var got []slurmv1alpha1.ActiveCheckStatus
	e.waitFor(3*time.Minute, "both checks passed on both workers", func() (bool, string) {
		out := e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.status.activeChecks}")
		got = nil
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 2 {
			return false, out
		}
		for _, c := range got {
			if c.Passed != 2 || len(c.Failing) > 0 || c.LastRunTime == nil || c.NextRunTime == nil {
				return false, out
			}
		}
		return true, out
	})
	jobs := e.onLogin("squeue -t all -h -o '%j|%u|%N|%T' | grep '^slurm-operator-check-' | sort -u")
	e.t.Logf("the check jobs:\n%s", jobs)
	for _, want := range []string{"slurm-operator-check-mpi|slurm|worker-[0-1]|COMPLETED", "slurm-operator-check-jail|slurm|worker-0|COMPLETED", "slurm-operator-check-jail|slurm|worker-1|COMPLETED"} {
		if !strings.Contains(jobs, want) {
			e.t.Errorf("no check job %q", want)
		}
	}
	if out := e.onLogin("sinfo -h -N -o '%N %T %E'"); strings.Contains(out, "drain") {
		e.t.Errorf("a worker is drained after passing checks:\n%s", out)
	}
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/activeChecks"}]`)
	e.waitFor(time.Minute, "the status without active checks", func() (bool, string) {
		out := e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.status.activeChecks}")
		return strings.TrimSpace(out) == "", out
	})
}

// checkActiveCheckOutlier runs the MPI all-reduce check on three workers whose pods talk over
// the node's pod network, with worker-2's interface throttled by traffic control: worker-2
// alone is drained, the reason naming the check and the bandwidth, the status naming it
// failing with its next check; unthrottled, the next run (a minute on) resumes it. The check
// leaves the spec at the end, and with it every trace.
func (e *env) checkActiveCheckOutlier() {
	t := e.t
	t.Helper()
	// tc on each of worker-2's interfaces but lo (in its pod's network namespace: the slurmd
	// container is privileged, and the jail has iproute2).
	tc := func(qdisc string) (string, error) {
		return e.kubectl("exec", "-n", ns, cluster+"-worker-2", "-c", "slurmd", "--", "slurm-jail-exec", "--", "sh", "-c",
			"for d in $(ip -o -4 addr show | awk '$2 != \"lo\" {print $2}'); do tc qdisc "+qdisc+" || exit 1; done")
	}
	if out, err := tc("add dev $d root tbf rate 100mbit burst 64kb latency 400ms"); err != nil {
		t.Fatalf("throttling worker-2: %v\n%s", err, out)
	}
	// Lifted whatever happens, so that the tests after this one find a fast worker-2.
	mend := func() (string, error) { return tc("del dev $d root") }
	defer func() { _, _ = mend() }()
	defer e.removeActiveChecks()
	reason := e.drainedByAddedCheck(`{"name":"mpi","program":"MPIAllReduce","timeoutSeconds":120,"intervalMinutes":1}`,
		"worker-2", "slurm-operator: check mpi: best all-reduce ")
	if !strings.Contains(reason, "below 50% of the median worker's") {
		t.Errorf("worker-2's reason does not give the floor: %q", reason)
	}
	for _, w := range []string{"worker-0", "worker-1"} {
		if state, reason := e.slurmState(w); strings.Contains(state, "DRAIN") {
			t.Errorf("%s drained too: %s %q", w, state, reason)
		}
	}
	e.waitFor(time.Minute, "the status naming worker-2 failing, with its next check", func() (bool, string) {
		var st slurmv1alpha1.SlurmClusterStatus
		out := e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.status}")
		if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.ActiveChecks) != 1 {
			return false, out
		}
		c := st.ActiveChecks[0]
		if len(c.Failing) != 1 || c.Failing[0].Node != "worker-2" || c.Passed != 2 {
			return false, out
		}
		for _, o := range st.Workers.OutOfService {
			if o.Name == "worker-2" && o.NextCheck != nil {
				return true, out
			}
		}
		return false, out
	})
	if out, err := mend(); err != nil {
		t.Fatalf("mending worker-2's interface: %v\n%s", err, out)
	}
	mended := time.Now()
	// Resumed for each re-run, worker-2 is idle for moments while still failing: the status's
	// count of passes, read from the jobs, is what says it passed.
	e.waitFor(3*time.Minute, "a passing run on all three workers, worker-2 back in service", func() (bool, string) {
		var c []slurmv1alpha1.ActiveCheckStatus
		out := e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.status.activeChecks}")
		if err := json.Unmarshal([]byte(out), &c); err != nil || len(c) != 1 || c[0].Passed != 3 || len(c[0].Failing) != 0 {
			return false, out
		}
		state, reason := e.slurmState("worker-2")
		return !strings.Contains(state, "DRAIN"), out + " " + state + " " + reason
	})
	t.Logf("worker-2 back %.0fs after its interface was mended", time.Since(mended).Seconds())
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/activeChecks"}]`)
	e.waitFor(time.Minute, "the status without active checks", func() (bool, string) {
		out := e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.status.activeChecks}")
		return strings.TrimSpace(out) == "", out
	})
}

// checkActiveCheckInPods turns on a check that runs as a Kubernetes Job, from the worker image,
// failing on worker-1 alone: each run's pod runs on the Kubernetes node of the worker it
// checks while a Slurm job of the operator holds that worker; worker-1 is drained with the
// pod's output, worker-0 is not. Taken out of the spec, the check's drain is lifted.
func (e *env) checkActiveCheckInPods() {
	t := e.t
	t.Helper()
	defer e.removeActiveChecks()
	e.drainedByAddedCheck(`{"name":"pod","runAs":"KubernetesJob","timeoutSeconds":120,`+
		`"script":"if [ \"$SLURMD_NODENAME\" = worker-1 ]; then echo \"$SLURMD_NODENAME fails on purpose in $HOSTNAME\"; exit 4; fi\necho fine"}`,
		"worker-1", "slurm-operator: check pod: worker-1 fails on purpose in ")
	if state, reason := e.slurmState("worker-0"); strings.Contains(state, "DRAIN") {
		t.Errorf("worker-0 drained too: %s %q", state, reason)
	}
	// Each run's pod ran to its end on its worker's Kubernetes node, and the operator then ended
	// the run's holder (worker-0's result may be taken a look after worker-1's).
	var want []string
	for i, w := range []string{"worker-0", "worker-1"} {
		node := strings.TrimSpace(e.kubectlOK("get", "pod", "-n", ns, cluster+"-worker-"+strconv.Itoa(i), "-o", "jsonpath={.spec.nodeName}"))
		want = append(want, w+" "+node+" "+map[string]string{"worker-0": "Succeeded", "worker-1": "Failed"}[w])
	}
	e.waitFor(time.Minute, "each worker's check pod ended on its worker's node", func() (bool, string) {
		pods := e.kubectlOK("get", "pods", "-n", ns, "-l", "slurm.hpc.dev/active-check=pod", "-o",
			`jsonpath={range .items[*]}{.metadata.labels.slurm\.hpc\.dev/slurm-node} {.spec.nodeName} {.status.phase}{"\n"}{end}`)
		return strings.Contains(pods, want[0]) && strings.Contains(pods, want[1]), pods
	})
	e.waitFor(time.Minute, "both holder jobs ended by the operator", func() (bool, string) {
		holders := e.onLogin("squeue -t all -h -o '%j|%N|%T' | grep '^slurm-operator-check-pod|' | sort -u")
		return strings.Contains(holders, "slurm-operator-check-pod|worker-0|CANCELLED") &&
			strings.Contains(holders, "slurm-operator-check-pod|worker-1|CANCELLED"), holders
	})
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/activeChecks"}]`)
	e.waitFor(time.Minute, "worker-1 back in service once the check left the spec", func() (bool, string) {
		state, reason := e.slurmState("worker-1")
		return !strings.Contains(state, "DRAIN"), state + " " + reason
	})
}

// drainedByAddedCheck sets spec.activeChecks to the one check (JSON) and waits until node is
// drained with a reason that starts with prefix; it logs how long that took and returns the
// reason.
func (e *env) drainedByAddedCheck(check, node, prefix string) string {
	e.t.Helper()
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", `{"spec":{"activeChecks":[`+check+`]}}`)
	start := time.Now()
	e.waitFor(3*time.Minute, node+" drained by the check", func() (bool, string) {
		state, reason := e.slurmState(node)
		return strings.Contains(state, "DRAIN") && strings.HasPrefix(reason, prefix), state + " " + reason
	})
	_, reason := e.slurmState(node)
	e.t.Logf("%s drained %.0fs after the check was added: %s", node, time.Since(start).Seconds(), reason)
	return reason
}

// removeActiveChecks takes every active check out of the spec, whatever the test left.
func (e *env) removeActiveChecks() {
	_, _ = e.kubectl("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/activeChecks"}]`)
}
