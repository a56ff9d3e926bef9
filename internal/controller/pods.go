package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// podClusterIndex indexes the cached pods by the SlurmCluster they belong to (its instance
// label), so that a reconcile finds its cluster's pods without scanning every pod of the
// namespace: 200 clusters of 64 workers in one namespace are 12,800 pods, and each reconcile
// looks at its pods several times.
const podClusterIndex = "slurm.hpc.dev/cluster"

// podCluster is the index function: the cluster's name, for the operator's pods.
func podCluster(o client.Object) []string {
	l := o.GetLabels()
	if l[base.LabelManagedBy] != base.ManagedBy || l[base.LabelInstance] == "" {
		return nil
	}
	return []string{l[base.LabelInstance]}
}

// podsOf lists the cached pods of one component of the cluster.
func (r *SlurmClusterReconciler) podsOf(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, comp slurmv1alpha1.Component) (*corev1.PodList, error) {
	all := &corev1.PodList{}
	by := client.ListOption(client.MatchingFields{podClusterIndex: sc.Name})
	if !r.podsIndexed {
		// A reconciler made without the manager's cache (tests that count a direct
		// client's writes): the API server selects by label.
		by = client.MatchingLabels(base.ClusterLabels(sc))
	}
	if err := r.List(ctx, all, client.InNamespace(sc.Namespace), by); err != nil {
		return nil, err
	}
	out := &corev1.PodList{Items: all.Items[:0]}
	for _, p := range all.Items {
		if p.Labels[base.LabelComponent] == string(comp) && p.Labels[base.LabelName] == base.SelectorLabels(sc, comp)[base.LabelName] {
			out.Items = append(out.Items, p)
		}
	}
	return out, nil
}
