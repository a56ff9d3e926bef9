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

// observePendingWorkers finds the worker pods the size wants that cannot start, with the reason
// Kubernetes gives (the scheduler's, or the kubelet's for an image it cannot pull), for the
// WorkersAvailable condition, and records an event for each one the status did not name yet.
func (r *SlurmClusterReconciler) observePendingWorkers(ctx context.Context, s *reconcileScope) error {
	sc, o := s.desired, s.facts
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil {
		return fmt.Errorf("list worker pods: %w", err)
	}
	o.pendingWorkers = pendingWorkers(pods.Items, func(p corev1.Pod) bool { return withinSize(sc, slurmName(p)) })
	prev := findCondition(&s.cluster.Status, slurmv1alpha1.ConditionWorkersAvailable)
	// One event per pod the status names (the first few), when it names it first: the
	// scheduler's words change as it retries, the pod does not.
	for _, p := range o.pendingWorkers[:min(len(o.pendingWorkers), maxNamedPending)] {
		pod, _, _ := strings.Cut(p, " cannot start")
		if prev == nil || !strings.Contains(prev.Message, pod+" cannot start") {
			var name string
			_, _ = fmt.Sscanf(pod, "pod %s", &name)
			r.podEvent(sc, name, corev1.EventTypeWarning, slurmv1alpha1.EventWorkerPodPending, slurmv1alpha1.ConditionWorkersAvailable, p)
		}
	}
	return nil
}

// maxNamedPending is how many pending workers WorkersAvailable names (and has an event for).
const maxNamedPending = 5

// pendingWorkers describes each pod within its set's size (wanted) that is Pending and cannot
// start: "pod NAME (Slurm node worker-N) cannot start: REASON: MESSAGE". It is pure.
func pendingWorkers(pods []corev1.Pod, wanted func(corev1.Pod) bool) []string {
	var out []string
	for _, p := range pods {
		if !wanted(p) {
			continue
		}
		if why := cannotStart(p); why != "" {
			out = append(out, fmt.Sprintf("pod %s (Slurm node %s) cannot start: %s", p.Name, slurmName(p), why))
		}
	}
	sort.Strings(out)
	return out
}

// cannotStart is why a Pending pod cannot start, in Kubernetes' words: the scheduler's (it
// cannot place the pod), or the kubelet's for a container it cannot start (an image it cannot
// pull); "" for a pod that is not Pending, is leaving, or is only on its way.
func cannotStart(p corev1.Pod) string {
	if p.Status.Phase != corev1.PodPending || !p.DeletionTimestamp.IsZero() {
		return ""
	}
	why := ""
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			why = strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	for _, c := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := c.State.Waiting; why == "" && w != nil && slurmfacts.ContainerCannotStart[w.Reason] {
			why = strings.TrimSpace(w.Reason + ": " + w.Message)
		}
	}
	return why
}
