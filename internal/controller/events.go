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

// conditionEvents records one event for each condition whose status changed between old and
// next: a Warning when it turned bad (Degraded True, any other False), Normal when it turned
// good. A first Degraded=False says nothing and is not recorded.
func (r *SlurmClusterReconciler) conditionEvents(sc *slurmv1alpha1.SlurmCluster, old, next []metav1.Condition) {
	for _, c := range next {
		prev := meta.FindStatusCondition(old, c.Type)
		if prev != nil && prev.Status == c.Status {
			continue
		}
		if c.Type == slurmv1alpha1.ConditionDegraded && c.Status == metav1.ConditionFalse && prev == nil {
			continue
		}
		eventType := corev1.EventTypeNormal
		if (c.Type == slurmv1alpha1.ConditionDegraded) == (c.Status == metav1.ConditionTrue) {
			eventType = corev1.EventTypeWarning
		}
		note := c.Type + " is " + string(c.Status)
		if c.Message != "" {
			note += ": " + c.Message
		}
		r.event(sc, eventType, c.Reason, c.Type, note)
	}
}
