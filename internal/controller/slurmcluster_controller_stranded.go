package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// outOfServiceTaint is Kubernetes' taint for a node that is shut down for good: pods on it are
// deleted without the kubelet's word and their volumes detached, so a StatefulSet can make the
// ordinal again elsewhere (the controller's ReadWriteOnce spool included).
var outOfServiceTaint = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// strandedPod is a worker pod whose deletion cannot finish: its grace period passed and its
// Kubernetes node does not answer (not ready, or gone), so no kubelet will confirm it.
type strandedPod struct {
	pod, node string
	// lostFor is how long the node has not been ready (since its Ready condition changed).
	lostFor time.Duration
}

func (s strandedPod) String() string {
	return fmt.Sprintf("pod %s on node %s, which has not been ready for %s", s.pod, s.node, s.lostFor.Round(time.Second))
}

// findStrandedWorkers finds worker pods stranded on a lost Kubernetes node. A StatefulSet never
// makes such a pod's ordinal again, and counting it as a replacement in flight would stop every
// other worker's update: the update phase leaves them out, the status (Degraded) and an event
// name each one with its node, and a gauge counts them. With the manager's
// --out-of-service-taint-after, a node lost for that long gets Kubernetes' out-of-service taint
// (docs/reliability.md); otherwise the admin does that, or brings the node back.
func (r *SlurmClusterReconciler) findStrandedWorkers(ctx context.Context, s *reconcileScope) error {
	sc, o := s.desired, s.facts
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil {
		return fmt.Errorf("list worker pods: %w", err)
	}
	t := now()
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() || p.DeletionTimestamp.After(t) || p.Spec.NodeName == "" {
			continue
		}
		node := &corev1.Node{}
		err := r.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, node)
		if client.IgnoreNotFound(err) != nil {
			continue
		}
		var lostFor time.Duration
		if err == nil {
			if nodeReady(node) {
				continue
			}
			lostFor = t.Sub(notReadySince(node, p.DeletionTimestamp.Time))
		}
		sp := strandedPod{pod: p.Name, node: p.Spec.NodeName, lostFor: lostFor}
		o.stranded = append(o.stranded, sp)
		if err == nil && r.OutOfServiceTaintAfter > 0 && lostFor >= r.OutOfServiceTaintAfter {
			// A refused taint (the operator may not patch nodes) is said, and stops nothing:
			// the rest of the cluster is looked after as without the option.
			if err := r.taintOutOfService(ctx, node); err != nil {
				log.FromContext(ctx).Error(err, "taint a lost node out of service", "node", node.Name)
				r.event(sc, corev1.EventTypeWarning, slurmv1alpha1.EventWorkerNodeLost, slurmv1alpha1.ConditionDegraded, err.Error())
			}
		}
	}
	sort.Slice(o.stranded, func(i, j int) bool { return o.stranded[i].pod < o.stranded[j].pod })
	prev := findCondition(&s.cluster.Status, slurmv1alpha1.ConditionDegraded)
	for _, sp := range o.stranded {
		if prev == nil || !strings.Contains(prev.Message, "pod "+sp.pod+" on node "+sp.node) {
			r.podEvent(sc, sp.pod, corev1.EventTypeWarning, slurmv1alpha1.EventWorkerNodeLost, slurmv1alpha1.ConditionDegraded,
				sp.String()+": the pod cannot be deleted and its worker cannot be replaced until the node is back or declared out of service")
		}
	}
	return nil
}

// notReadySince is when the node's Ready condition last changed (or, without one, fallback).
func notReadySince(n *corev1.Node, fallback time.Time) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return fallback
}

// taintOutOfService puts Kubernetes' out-of-service taint on a lost node, once. The node is
// read whole from the API server (the cache keeps no taints), and patched only if it did not
// change meanwhile, so no other taint is lost.
func (r *SlurmClusterReconciler) taintOutOfService(ctx context.Context, cached *corev1.Node) error {
	node := &corev1.Node{}
	reader := client.Reader(r.APIReader)
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, types.NamespacedName{Name: cached.Name}, node); err != nil {
		return fmt.Errorf("read lost node %s: %w", cached.Name, err)
	}
	for _, t := range node.Spec.Taints {
		if t.Key == outOfServiceTaint.Key {
			return nil
		}
	}
	patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	node.Spec.Taints = append(node.Spec.Taints, outOfServiceTaint)
	if err := r.Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("taint lost node %s out of service: %w", node.Name, err)
	}
	log.FromContext(ctx).Info("tainted a lost node out of service", "node", node.Name)
	return nil
}

// strandedNames are the stranded pods' names.
func (o *observed) strandedNames() map[string]bool {
	out := map[string]bool{}
	for _, sp := range o.stranded {
		out[sp.pod] = true
	}
	return out
}
