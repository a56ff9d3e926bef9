package node

import (
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// slurmdTimeout is the node test's SlurmdTimeout (hack/demo/values.yaml): slurmctld
// marks a node it has not heard from for that long not responding, then down.
const slurmdTimeout = 30 * time.Second

// checkNodesHealAfterTimeout waits three times SlurmdTimeout, so that slurmctld has pinged every
// node at the address it keeps for it and acted on the answer, then checks that every worker is
// idle and responding (no trailing *), carries no reason of the operator's, and runs a batch job
// (which slurmctld itself launches there, at that address).
func (e *env) checkNodesHealAfterTimeout(workers ...string) {
	e.t.Helper()
	time.Sleep(3 * slurmdTimeout)
	out := e.onLogin("sinfo -h -N -o '%N %t' | sort -u")
	var want []string
	for _, w := range workers {
		want = append(want, w+" idle")
	}
	if strings.TrimSpace(out) != strings.Join(want, "\n") {
		e.t.Errorf("%s after three times SlurmdTimeout: sinfo says\n%s", strings.Join(workers, ", "), out)
	}
	for _, w := range workers {
		if state, reason := e.slurmState(w); strings.HasPrefix(reason, slurmfacts.DrainReasonPrefix) {
			e.t.Errorf("%s is %s with the operator's reason %q left behind", w, state, reason)
		}
		if out, err := e.sshErr(e.login, "timeout 60 sbatch --wait -w "+w+" -o /dev/null --wrap true && echo ran"); err != nil || !strings.HasSuffix(strings.TrimSpace(out), "ran") {
			e.t.Errorf("a batch job on %s: %v\n%s", w, err, out)
		}
	}
}
