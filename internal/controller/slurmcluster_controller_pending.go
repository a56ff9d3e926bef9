package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// observePendingWorkers finds the worker pods the size wants that cannot start, with the reason
// Kubernetes gives (the scheduler's, or the kubelet's for an image it cannot pull), and those
// Kubernetes refused to create (observeRefusedWorkers), for the WorkersAvailable condition, and
// records an event for each one the status did not name yet.
func (r *SlurmClusterReconciler) observePendingWorkers(ctx context.Context, s *reconcileScope) error {
	sc, o := s.desired, s.facts
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil {
		return fmt.Errorf("list worker pods: %w", err)
	}
	o.pendingWorkers = pendingWorkers(pods.Items, func(p corev1.Pod) bool { return withinSize(sc, slurmName(p)) })
	r.observeRefusedWorkers(ctx, sc, o, pods.Items)
	prev := findCondition(&s.cluster.Status, slurmv1alpha1.ConditionWorkersAvailable)
	// One event per pod the status names (the first few), when it names it first: the
	// scheduler's words change as it retries, the pod does not.
	named := cannotStartWorkers(sc, o)
	for _, p := range named[:min(len(named), maxNamedPending)] {
		said, _, _ := strings.Cut(p, ": ") // "pod NAME (Slurm node …) cannot start", or "… cannot be created"
		if prev == nil || !strings.Contains(prev.Message, said+": ") {
			pod, _, _ := strings.Cut(said, " (")
			var name string
			_, _ = fmt.Sscanf(pod, "pod %s", &name)
			reason := slurmv1alpha1.EventWorkerPodPending
			if strings.Contains(p, " cannot be created: ") {
				reason = slurmv1alpha1.EventWorkerPodRefused
			}
			r.podEvent(sc, name, corev1.EventTypeWarning, reason, slurmv1alpha1.ConditionWorkersAvailable, p)
		}
	}
	return nil
}

// cannotStartWorkers names the pending workers, then those Kubernetes refused to create ("pod
// NAME (Slurm node worker-N) cannot be created: WORDS"), each list sorted. It is pure.
func cannotStartWorkers(sc *slurmv1alpha1.SlurmCluster, o *observed) []string {
	out := append([]string{}, o.pendingWorkers...)
	var refused []string
	for node, why := range o.refusedWorkers {
		words := strings.TrimPrefix(why, reasonFailedCreate+": ")
		refused = append(refused, fmt.Sprintf("pod %s (Slurm node %s) cannot be created: %s", workerPodName(sc, node), node, words))
	}
	sort.Strings(refused)
	return append(out, refused...)
}

// observeRefusedWorkers finds, in every worker set, the pods Kubernetes refused to create
// (refusedInSet), for WorkersAvailable.
func (r *SlurmClusterReconciler) observeRefusedWorkers(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, o *observed, pods []corev1.Pod) {
	o.refusedWorkers = nil
	for _, ws := range sc.WorkerSets() {
		sts := o.nodeSets[ws.Name]
		if ws.Name == slurmv1alpha1.DefaultNodeSet {
			sts = o.worker
		}
		for node, why := range r.refusedInSet(ctx, ws.Name, ws.Worker.NodeCount(), sts, pods) {
			if o.refusedWorkers == nil {
				o.refusedWorkers = map[string]string{}
			}
			o.refusedWorkers[node] = why
		}
	}
}

// refusedInSet finds the pods of a worker set (its Slurm nodes set-0 … set-(size-1)) that its
// StatefulSet wants and that do not exist because Kubernetes refused to create them (a
// ResourceQuota, a LimitRange, an admission webhook), by Slurm node name: the pod's latest
// create event from the StatefulSet controller is a FailedCreate, whose words it keeps. A pod
// missing for a moment while the StatefulSet replaces it has a SuccessfulCreate as its latest.
// The events are read (from the API server, not the cache) only when the set lacks a pod; an
// error leaves the pods unnamed until the next look.
func (r *SlurmClusterReconciler) refusedInSet(ctx context.Context, set string, size int32, sts *appsv1.StatefulSet, pods []corev1.Pod) map[string]string {
	if r.APIReader == nil || !mayLackPods(sts, size) {
		return nil
	}
	exists := make(map[string]bool, len(pods))
	for _, p := range pods {
		exists[p.Name] = true
	}
	missing := map[string]string{} // pod name → Slurm node name
	for i := range min(*sts.Spec.Replicas, size) {
		if pod := fmt.Sprintf("%s-%d", sts.Name, i); !exists[pod] {
			missing[pod] = fmt.Sprintf("%s-%d", set, i)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	events := &corev1.EventList{}
	if err := r.APIReader.List(ctx, events, client.InNamespace(sts.Namespace), client.MatchingFields{
		"involvedObject.kind": "StatefulSet", "involvedObject.name": sts.Name, "involvedObject.uid": string(sts.UID),
	}); err != nil {
		log.FromContext(ctx).Info("reading why a worker set lacks pods failed; trying again on the next look", "statefulSet", sts.Name, "error", err.Error())
		return nil
	}
	out := map[string]string{}
	for pod, why := range refusedPods(missing, events.Items) {
		out[missing[pod]] = why
	}
	return out
}

// mayLackPods says whether the StatefulSet's controller found it short of pods on its last pass:
// it has seen the StatefulSet's latest spec (observedGeneration) and counts fewer pods than the
// replicas it wants (of the set's first size). Before that pass the pods of a scale-up do not
// exist yet, and the set's last create event may be an old failure (the event recorder drops
// most events about an object after its first 25, a quota's retries included): a pod missing
// then is not taken for a refused one. It is pure.
func mayLackPods(sts *appsv1.StatefulSet, size int32) bool {
	if sts == nil || sts.Spec.Replicas == nil {
		return false
	}
	return sts.Status.ObservedGeneration >= sts.Generation && sts.Status.Replicas < min(*sts.Spec.Replicas, size)
}

// reasonFailedCreate is the reason of the StatefulSet controller's event for a pod (or claim)
// it could not create.
const reasonFailedCreate = "FailedCreate"

// refusedPods are the missing pods (by name) whose latest create event from the StatefulSet
// controller is a failure, with "FailedCreate: " and the API server's words. The controller
// writes "Create Pod NAME in StatefulSet SET successful" or "... failed error: WORDS" (and
// "Create Claim CLAIM for Pod NAME ..." for a claim, whose failure also keeps the pod from being
// created; older releases write "create"). Where a failure and a success share their time, the
// success counts. It is pure.
func refusedPods(missing map[string]string, events []corev1.Event) map[string]string {
	type last struct {
		at  time.Time
		why string
	}
	latest := map[string]last{}
	for _, e := range events {
		if e.Reason != reasonFailedCreate && e.Reason != "SuccessfulCreate" {
			continue
		}
		msg := strings.TrimPrefix(e.Message, "(combined from similar events): ")
		verb, what, _ := strings.Cut(msg, " ")
		if !strings.EqualFold(verb, "create") {
			continue
		}
		_, rest, ok := strings.Cut(msg, "Pod ")
		pod, rest, ok2 := strings.Cut(rest, " in StatefulSet ")
		if !ok || !ok2 || strings.Contains(pod, " ") {
			continue
		}
		why := ""
		if e.Reason == reasonFailedCreate {
			_, words, ok := strings.Cut(rest, " failed error: ")
			if !ok {
				continue
			}
			why = reasonFailedCreate + ": " + words
		} else if !strings.HasPrefix(what, "Pod ") {
			continue // a claim created: the pod may still fail
		}
		at := eventTime(e)
		if l, seen := latest[pod]; seen && (at.Before(l.at) || at.Equal(l.at) && why != "") {
			continue
		}
		latest[pod] = last{at: at, why: why}
	}
	out := map[string]string{}
	for pod := range missing {
		if l := latest[pod]; l.why != "" {
			out[pod] = l.why
		}
	}
	return out
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(e corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if t.IsZero() {
		t = e.FirstTimestamp.Time
	}
	if t.IsZero() {
		t = e.CreationTimestamp.Time
	}
	return t
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
