package activecheck

import (
	"context"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// A KubernetesJob check runs in two parts. A Slurm job of the operator, queued like any check
// job (first in line, the node to itself, GPUs included), holds the worker and does nothing
// else; once it runs, the operator creates the check's Kubernetes Job on the worker pod's
// Kubernetes node, and when that Job has ended it takes the result and cancels the holder. So
// the check never runs beside a user's job, and a restarted operator finds the holder (and
// through it the Kubernetes Job) as it finds any check job.

// holdMargin is how much longer than the check's timeout its holder may run: the pod's own
// deadline (the timeout, image pull included) ends it first.
const holdMargin = time.Minute

// Kubernetes reports whether the check runs as a Kubernetes Job.
func (c Check) Kubernetes() bool { return c.InPod }

// podEnded takes the result of a KubernetesJob check whose holder ended by itself (its time
// limit, or someone cancelled it): the pod's outcome when it has one (a pod that could not
// start is no word on the worker), a failure when the holder ran out its time with no outcome,
// and no word otherwise.
func (s *State) podEnded(ctx context.Context, api API, c Check, node string, holder int64, j slurm.Job, now time.Time) (Result, bool) {
	out, err := api.PodCheck(ctx, c, node, holder, false)
	switch {
	case err == nil && out.Ended:
		return podResult(c, node, out, now), true
	case j.Has("TIMEOUT"):
		return Result{Check: c.Name, Node: node, Output: "did not end within its timeout", At: now}, true
	}
	return Result{}, false
}

// notRunMax is how much of why a check could not run is kept: its start, where the cause is
// (it goes to an event, never to the node's reason).
const notRunMax = 512

// podResult is the result of a KubernetesJob check's run that ended: the end of the check's
// output, or the start of why it could not run.
func podResult(c Check, node string, out PodOutcome, now time.Time) Result {
	r := Result{Check: c.Name, Node: node, Passed: out.Passed, NotRun: out.NotRun, Output: clip(out.Output), At: now}
	if out.NotRun {
		r.Output = out.Output
		if len(r.Output) > notRunMax {
			r.Output = r.Output[:notRunMax]
		}
	}
	return r
}
