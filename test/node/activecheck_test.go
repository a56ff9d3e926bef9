package node

import (
	"encoding/json"
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
