package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// event records an event on the SlurmCluster, when the reconciler has a recorder. The action
// names what the event is about (a condition type): the events library folds events with the
// same type, reason, action and object into one series whatever their notes say, so events of
// different conditions that share a reason (NotReady) must differ in their action.
func (r *SlurmClusterReconciler) event(sc *slurmv1alpha1.SlurmCluster, eventType, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(sc, nil, eventType, reason, action, "%s", note)
	}
}

// workerEvent records an event on the SlurmCluster about one worker (a Slurm node name).
func (r *SlurmClusterReconciler) workerEvent(sc *slurmv1alpha1.SlurmCluster, node, eventType, reason, action, note string) {
	pod := workerPodName(sc, node)
	if pod == "" {
		r.event(sc, eventType, reason, action, note)
		return
	}
	r.podEvent(sc, pod, eventType, reason, action, note)
}

// podEvent records an event on the SlurmCluster about one of its pods: related to the pod, so
// that the events of several pods with the same reason are not folded into the first one's
// series (the events library keys them without their notes).
func (r *SlurmClusterReconciler) podEvent(sc *slurmv1alpha1.SlurmCluster, pod, eventType, reason, action, note string) {
	if r.Recorder == nil {
		return
	}
	related := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: sc.Namespace, Name: pod}}
	r.Recorder.Eventf(sc, related, eventType, reason, action, "%s", note)
}

// conditionEvents records one event for each condition whose status changed between old and
// next: a Warning when it turned bad (Degraded True, any other False), Normal when it turned
// good. A condition's first value is not a change: it is recorded only when it is a problem
// (a Warning that is not a cluster still starting), so creating a cluster records no event
// for every part that is not ready yet.
func (r *SlurmClusterReconciler) conditionEvents(sc *slurmv1alpha1.SlurmCluster, old, next []metav1.Condition) {
	for _, c := range next {
		prev := meta.FindStatusCondition(old, c.Type)
		if prev != nil && prev.Status == c.Status {
			continue
		}
		eventType := corev1.EventTypeNormal
		if (c.Type == slurmv1alpha1.ConditionDegraded) == (c.Status == metav1.ConditionTrue) {
			eventType = corev1.EventTypeWarning
		}
		if prev == nil && (eventType == corev1.EventTypeNormal || startingReasons[c.Reason]) {
			continue
		}
		note := c.Type + " is " + string(c.Status)
		if c.Message != "" {
			note += ": " + c.Message
		}
		r.event(sc, eventType, c.Reason, c.Type, note)
	}
}

// startingReasons are the reasons of a part that is on its way: news only once it is late, which
// a later change of the condition tells.
var startingReasons = map[string]bool{
	slurmv1alpha1.ReasonNotCreated:            true,
	slurmv1alpha1.ReasonNotReady:              true,
	slurmv1alpha1.ReasonPartiallyReady:        true,
	slurmv1alpha1.ReasonJobPending:            true,
	slurmv1alpha1.ReasonPopulating:            true,
	slurmv1alpha1.ReasonNoWorkerReady:         true,
	slurmv1alpha1.ReasonControllerUnavailable: true,
	slurmv1alpha1.ReasonJailNotPopulated:      true,
}
