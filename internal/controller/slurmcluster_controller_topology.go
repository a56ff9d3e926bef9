package controller

import (
	"context"
	"slices"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// workerPlacements are where the workers run, for spec.slurmConfig.topology and the worker
// sets' featuresFromNodeLabels: each worker pod on a node, with that node's labels they name
// (read from the node cache). A pod being deleted is left out (its worker is placed again with
// its new pod); so is a pod whose node is gone. Nil when neither names a label: nothing else
// reads them.
func (r *SlurmClusterReconciler) workerPlacements(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) ([]base.WorkerPlacement, error) {
	var keys []string
	if t := sc.Spec.SlurmConfig.Topology; t != nil {
		keys = append(keys, t.SwitchLabels...)
		if t.Plugin == slurmv1alpha1.TopologyBlock {
			keys = []string{t.BlockLabel}
		}
	}
	for _, set := range sc.WorkerSets() {
		for _, k := range set.Worker.FeaturesFromNodeLabels {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		r.topologyLabels.Delete(client.ObjectKeyFromObject(sc))
		return nil, nil
	}
	r.topologyLabels.Store(client.ObjectKeyFromObject(sc), keys)
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil {
		return nil, err
	}
	var out []base.WorkerPlacement
	for _, p := range pods.Items {
		i, err := strconv.ParseInt(p.Labels[base.LabelPodIndex], 10, 32)
		if err != nil || p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		var node corev1.Node
		if err := r.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		labels := map[string]string{}
		for _, k := range keys {
			if v, ok := node.Labels[k]; ok {
				labels[k] = v
			}
		}
		out = append(out, base.WorkerPlacement{Name: setOfPod(p) + "-" + strconv.Itoa(int(i)), Node: node.Name, Labels: labels})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// isTopologyLabel reports whether a cluster's topology names the node label key (as its
// last render found): the node predicate lets a change of it through.
func (r *SlurmClusterReconciler) isTopologyLabel(key string) bool {
	found := false
	r.topologyLabels.Range(func(_, v any) bool {
		for _, k := range v.([]string) {
			if k == key {
				found = true
				return false
			}
		}
		return true
	})
	return found
}
