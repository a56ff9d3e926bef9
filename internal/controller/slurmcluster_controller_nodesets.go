package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// A worker's Slurm node name is <set>-N: worker-3 for spec.slurmNodes.worker, a100-1 for the
// node set a100. Its pod is <cluster>-<set>-N, with the set's name in its node-set label (none
// for spec.slurmNodes.worker's pods, whose selector predates node sets).

// setOfPod is the worker set of a worker pod.
func setOfPod(p corev1.Pod) string {
	if s := p.Labels[slurmv1alpha1.LabelNodeSet]; s != "" {
		return s
	}
	return slurmv1alpha1.DefaultNodeSet
}

// slurmName is the Slurm node name of a worker pod (worker-N, or <set>-N).
func slurmName(p corev1.Pod) string {
	return setOfPod(p) + "-" + strconv.Itoa(ordinal(p))
}

// splitNodeName is the set and index of a worker's Slurm node name, when it names a worker of
// one of the cluster's sets.
func splitNodeName(sc *slurmv1alpha1.SlurmCluster, name string) (slurmv1alpha1.WorkerSet, int, bool) {
	k := strings.LastIndex(name, "-")
	if k <= 0 {
		return slurmv1alpha1.WorkerSet{}, -1, false
	}
	i, err := strconv.Atoi(name[k+1:])
	if err != nil || i < 0 {
		return slurmv1alpha1.WorkerSet{}, -1, false
	}
	set, ok := sc.WorkerSet(name[:k])
	if !ok {
		return slurmv1alpha1.WorkerSet{}, -1, false
	}
	return set, i, true
}

// isWorkerNode says whether a Slurm node name is one of the cluster's workers.
func isWorkerNode(sc *slurmv1alpha1.SlurmCluster, name string) bool {
	_, _, ok := splitNodeName(sc, name)
	return ok
}

// withinSize says whether a worker's Slurm node name is within its set's size (a node above it
// is leaving).
func withinSize(sc *slurmv1alpha1.SlurmCluster, name string) bool {
	set, i, ok := splitNodeName(sc, name)
	return ok && i < int(set.Worker.NodeCount())
}

// workerPodName is the pod of a worker's Slurm node name ("" when it names no worker).
func workerPodName(sc *slurmv1alpha1.SlurmCluster, node string) string {
	set, i, ok := splitNodeName(sc, node)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s-%d", sc.WorkerSetStatefulSetName(set.Name), i)
}

// setNodeNames are the Slurm names of nodes 0…n-1 of a set.
func setNodeNames(set string, n int32) []string {
	names := make([]string, 0, n)
	for i := int32(0); i < n; i++ {
		names = append(names, set+"-"+strconv.Itoa(int(i)))
	}
	return names
}

// podsOfSet keeps the pods of one worker set.
func podsOfSet(pods []corev1.Pod, set string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if setOfPod(p) == set {
			out = append(out, p)
		}
	}
	return out
}

// nodeSetStatefulSets lists the StatefulSets of the cluster's node sets (not
// spec.slurmNodes.worker's), whether the spec still names their sets or not.
func (r *SlurmClusterReconciler) nodeSetStatefulSets(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) ([]appsv1.StatefulSet, error) {
	list := &appsv1.StatefulSetList{}
	if err := r.List(ctx, list, client.InNamespace(sc.Namespace), client.MatchingLabels(base.SelectorLabels(sc, slurmv1alpha1.ComponentWorker)),
		client.HasLabels{slurmv1alpha1.LabelNodeSet}); err != nil {
		return nil, fmt.Errorf("list node sets' StatefulSets: %w", err)
	}
	var out []appsv1.StatefulSet
	for _, sts := range list.Items {
		if metav1.IsControlledBy(&sts, sc) {
			out = append(out, sts)
		}
	}
	return out, nil
}

// findLeavingNodeSets puts back into the desired spec, with size 0, the node sets removed from
// the spec whose StatefulSets still have workers: they are drained like a scale-down to 0 and
// stay in slurm.conf until their jobs end; then their StatefulSets are pruned.
func (r *SlurmClusterReconciler) findLeavingNodeSets(ctx context.Context, s *reconcileScope) error {
	list, err := r.nodeSetStatefulSets(ctx, s.desired)
	if err != nil {
		return err
	}
	var recorded []string
	for _, sts := range list {
		if sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0 && sts.Status.Replicas == 0 {
			continue
		}
		if v, ok := sts.Annotations[slurmv1alpha1.AnnotationNodeSet]; ok {
			recorded = append(recorded, v)
		}
	}
	s.facts.leavingSets = s.desired.WithLeavingNodeSets(recorded)
	return nil
}
