package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// followNodeHealth tells Slurm what Kubernetes knows of the workers' nodes. A worker whose node
// is cordoned (kubectl cordon or drain, a node upgrade), not ready, or has fewer allocatable GPUs
// than the worker pod asked for (the device plugin took an unhealthy GPU out) is drained in Slurm, with a
// reason that names the node and what is wrong: running jobs finish, no new job lands there.
// When the node is healthy again (and the worker stays: its ordinal is below the size), that
// drain, and only that one, is lifted: an admin's drain, a scale-down's or an update's, or the
// health check's, stays. When Slurm cannot be asked, nothing
// is changed. The worker pods such a node keeps from being ready are named in WorkersAvailable.
func (r *SlurmClusterReconciler) followNodeHealth(ctx context.Context, s *reconcileScope) error {
	sc := s.desired
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil {
		return fmt.Errorf("list worker pods: %w", err)
	}
	// problems maps a Slurm node name to what is wrong with its Kubernetes node; healthy holds
	// the workers known to be fine: placed, staying, their node read and sound. A worker that is
	// neither (its pod not placed yet or leaving, its node gone or unread, its ordinal above the
	// size) is left as it is.
	problems, healthy := map[string]string{}, map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || !p.DeletionTimestamp.IsZero() {
			continue
		}
		node := &corev1.Node{}
		if err := r.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, node); err != nil {
			continue
		}
		name := slurmName(p)
		if why := nodeProblem(node, podGPUs(p), sc.Spec.SlurmNodes.Worker.DrainOnNodeConditions); why != "" {
			problems[name] = fmt.Sprintf("%s %s %s", slurmfacts.DrainKubernetesNode, node.Name, why)
			if !podReady(p) {
				s.facts.unhealthyNodeWorkers = append(s.facts.unhealthyNodeWorkers, fmt.Sprintf("pod %s: Kubernetes node %s %s", p.Name, node.Name, why))
			}
		} else if withinSize(sc, name) {
			healthy[name] = true
		}
	}
	if len(problems) == 0 && len(healthy) == 0 {
		return nil
	}
	// Asked now, not taken from an earlier phase: the scale-down and the update may have
	// drained nodes in this reconcile (the client asks again after a drain).
	api := r.slurmFor(s)
	nodes, err := api.Nodes(ctx)
	if err != nil && !errors.Is(err, slurm.ErrIncompleteAnswer) {
		return nil // Slurm cannot be asked: change nothing
	}
	if err == nil {
		s.facts.slurmNodes, s.facts.slurmReached = nodes, true
	}
	for _, n := range nodes {
		ours := strings.HasPrefix(n.Reason, slurmfacts.DrainKubernetesNode+" ")
		why, bad := problems[n.Name]
		switch {
		case bad && !n.Has("DRAIN") && !n.Has("DOWN") && !n.Has("FAIL"):
			log.FromContext(ctx).Info("draining a worker whose Kubernetes node is unhealthy", "node", n.Name, "reason", why)
			if err := api.Drain(ctx, n.Name, why); err != nil {
				return fmt.Errorf("drain %s: %w", n.Name, err)
			}
		case bad && ours && n.Reason != why:
			// Still unhealthy, for another reason now: say the current one.
			if err := api.Drain(ctx, n.Name, why); err != nil {
				return fmt.Errorf("drain %s: %w", n.Name, err)
			}
		case healthy[n.Name] && ours && n.Has("DRAIN"):
			log.FromContext(ctx).Info("resuming a worker whose Kubernetes node is healthy again", "node", n.Name)
			if _, err := api.ResumeIfOwned(ctx, n.Name); err != nil {
				return fmt.Errorf("resume %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

// podGPUs is the GPUs a worker pod's containers asked for.
func podGPUs(p corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		q := c.Resources.Limits[slurmfacts.GPUResource]
		n += q.Value()
	}
	return n
}

// nodeProblem says what keeps a Kubernetes node from running jobs, or "" when nothing does.
// gpus is how many GPUs the worker pod on it asked for (0: none, not checked); conditions are
// the condition types that mean a problem when True (spec.slurmNodes.worker.drainOnNodeConditions).
func nodeProblem(n *corev1.Node, gpus int64, conditions []string) string {
	switch {
	case n.Spec.Unschedulable:
		return "is cordoned"
	case !nodeReady(n):
		return "is not ready"
	}
	for _, c := range n.Status.Conditions {
		if c.Status == corev1.ConditionTrue && slices.Contains(conditions, string(c.Type)) {
			return conditionProblem(c)
		}
	}
	if gpus > 0 {
		have := n.Status.Allocatable[slurmfacts.GPUResource]
		if v := have.Value(); v < gpus {
			return fmt.Sprintf("has %d of %d GPUs allocatable", v, gpus)
		}
	}
	return ""
}

// maxConditionText bounds what a drain reason quotes of a condition's reason and message.
const maxConditionText = 160

// conditionProblem is the drain reason's words for a problem condition: its type, reason and
// message, the text bounded (Slurm shows the reason in sinfo -R and scontrol show node).
func conditionProblem(c corev1.NodeCondition) string {
	text := strings.TrimSpace(strings.Join(strings.Fields(strings.TrimSpace(c.Reason+": "+c.Message)), " "))
	text = strings.TrimSuffix(strings.TrimPrefix(text, ":"), ":")
	text = strings.TrimSpace(text)
	if r := []rune(text); len(r) > maxConditionText {
		text = string(r[:maxConditionText-1]) + "…"
	}
	if text == "" {
		return "has condition " + string(c.Type)
	}
	return "has condition " + string(c.Type) + " (" + text + ")"
}

// nodeReady reports whether the node's Ready condition is True. A node with no Ready condition
// (never reported) is not ready.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
