package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// slurmctldContainer is the controller pod's container that runs slurmctld.
const slurmctldContainer = "slurmctld"

// stateUnreadableLine returns the line of a container's termination message (its last log
// lines) in which slurmctld says it cannot read its state, or "" when there is none. Only that
// line is kept in the cache.
func stateUnreadableLine(msg string) string {
	for _, l := range strings.Split(msg, "\n") {
		if strings.Contains(l, slurmfacts.StateUnreadable) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// observeControllerState finds the controller pods whose slurmctld stopped because it cannot
// read its state, and is not running now.
func (r *SlurmClusterReconciler) observeControllerState(ctx context.Context, s *reconcileScope) error {
	pods, err := r.podsOf(ctx, s.desired, slurmv1alpha1.ComponentController)
	if err != nil {
		return err
	}
	s.facts.stateUnreadable = stateUnreadable(pods.Items)
	return nil
}

// stateUnreadable names each pod whose slurmctld is not running and last stopped because it
// cannot read a state file, with slurmctld's words.
func stateUnreadable(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		for _, c := range p.Status.ContainerStatuses {
			if c.Name != slurmctldContainer || c.State.Running != nil {
				continue
			}
			line := ""
			if t := c.State.Terminated; t != nil {
				line = stateUnreadableLine(t.Message)
			}
			if t := c.LastTerminationState.Terminated; line == "" && t != nil {
				line = stateUnreadableLine(t.Message)
			}
			if line != "" {
				out = append(out, fmt.Sprintf("%s: %s", p.Name, line))
			}
		}
	}
	sort.Strings(out)
	return out
}

// stateUnreadableMessage is the condition message for pods that stateUnreadable named.
func stateUnreadableMessage(pods []string) string {
	return "slurmctld stops at start because it cannot read its state (" + strings.Join(pods, "; ") +
		"). It is never started with -i, which would drop every job it cannot read: restore StateSaveLocation " +
		"from the backup, or accept the loss and start it once with -i (docs/reliability.md, \"slurmctld cannot read its state\")"
}
