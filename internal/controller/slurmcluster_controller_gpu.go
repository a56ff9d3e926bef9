package controller

import (
	"context"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/gpu"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// findGPUShape derives each worker set's GPU shape from the GPU nodes in the cache (which
// holds of nodes only labels, allocatable GPUs, cordon and readiness). A shape is computed
// once per node change and set change (shapeMemo); the nodes are listed only when one is not
// memoised.
func (r *SlurmClusterReconciler) findGPUShape(ctx context.Context, s *reconcileScope) error {
	sc, o := s.desired, s.facts
	sets := sc.WorkerSets()
	results := make([]gpu.Result, len(sets))
	var gen uint64
	if r.shapes != nil {
		gen = r.shapes.generation()
	}
	var nodes *corev1.NodeList
	for i, set := range sets {
		key, inputs := shapeKey(sc, set), shapeInputs(sc, set)
		if r.shapes != nil && inputs != "" {
			if res, ok := r.shapes.lookup(key, inputs); ok {
				results[i] = res
				continue
			}
		}
		if nodes == nil {
			nodes = &corev1.NodeList{}
			// Read-only: gpu.FindSet copies what it keeps, and a deep copy of thousands of
			// nodes would be most of the operator's garbage.
			if err := r.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
				return err
			}
		}
		results[i] = gpu.FindSet(sc, set, nodes.Items)
		if r.shapes != nil && inputs != "" {
			r.shapes.store(gen, key, inputs, results[i])
		}
	}
	o.gpu = results[0]
	for i, set := range sets[1:] {
		if o.setGPUs == nil {
			o.setGPUs = map[string]gpu.Result{}
		}
		o.setGPUs[set.Name] = results[i+1]
	}
	return nil
}

// allClusters maps a GPU node's change to every SlurmCluster: any of them may select it.
func (r *SlurmClusterReconciler) allClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &slurmv1alpha1.SlurmClusterList{}
	if err := r.List(ctx, list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, sc := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sc)})
	}
	return reqs
}

// nodeChangeMatters lets through node events that can change a GPU shape, a worker's node
// health or the network topology: a GPU node appearing or leaving, a change of a GPU label,
// of a label topologyLabel says a cluster's spec.slurmConfig.topology names, of allocatable
// GPUs, of the cordon or of readiness. Other label or status changes (heartbeats, images) are
// dropped before they cause a reconcile; so are nodes without GPUs appearing or leaving (no
// worker runs on a node that is not there yet, and a worker's pod leaves with its node).
//
// shapesChanged is called, before the event can enqueue anything, for every node event that
// can change a GPU shape, also one it drops (a filter's label changing): the shapes memoised
// are then stale for the next reconcile, whatever causes it.
func nodeChangeMatters(topologyLabel func(key string) bool, shapesChanged func()) predicate.Predicate {
	matters := func(key string) bool { return gpu.IsShapeLabel(key) || topologyLabel(key) }
	gpuNode := func(o client.Object) bool { return o.GetLabels()[gpu.LabelPresent] == "true" }
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			shapesChanged()
			return gpuNode(e.Object)
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			shapesChanged()
			return gpuNode(e.Object)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldN, ok1 := e.ObjectOld.(*corev1.Node)
			newN, ok2 := e.ObjectNew.(*corev1.Node)
			if !ok1 || !ok2 {
				shapesChanged()
				return true
			}
			if shapeRelevantNodeChange(oldN, newN) {
				shapesChanged()
			}
			if oldN.Spec.Unschedulable != newN.Spec.Unschedulable || nodeReady(oldN) != nodeReady(newN) || problemConditions(oldN) != problemConditions(newN) {
				return true
			}
			for k, v := range newN.Labels {
				if oldN.Labels[k] != v && matters(k) {
					return true
				}
			}
			for k := range oldN.Labels {
				if _, still := newN.Labels[k]; !still && matters(k) {
					return true
				}
			}
			oldQ := oldN.Status.Allocatable[slurmfacts.GPUResource]
			newQ := newN.Status.Allocatable[slurmfacts.GPUResource]
			return oldQ.Cmp(newQ) != 0
		},
	}
}

// problemConditions sums up a node's True conditions other than Ready (types, reasons and
// messages), which drainOnNodeConditions may name: a change of them is worth a reconcile, a
// heartbeat is not.
func problemConditions(n *corev1.Node) string {
	var out []string
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady && c.Status == corev1.ConditionTrue {
			out = append(out, string(c.Type)+"\x00"+c.Reason+"\x00"+c.Message)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\x01")
}
