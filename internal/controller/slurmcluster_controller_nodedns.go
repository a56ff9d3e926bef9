package controller

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// nodeAddresses are the addresses of the pods that run the cluster's Slurm nodes (controller,
// workers, login), by Slurm node name, for the node names' EndpointSlice (package nodedns).
// Pods without an address yet, or being deleted, are left out.
func (r *SlurmClusterReconciler) nodeAddresses(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) ([]base.NodeAddress, error) {
	var out []base.NodeAddress
	for _, comp := range []slurmv1alpha1.Component{slurmv1alpha1.ComponentController, slurmv1alpha1.ComponentWorker, slurmv1alpha1.ComponentLogin} {
		pods, err := r.podsOf(ctx, sc, comp)
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			i, err := strconv.ParseInt(p.Labels[base.LabelPodIndex], 10, 32)
			if err != nil || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
				continue
			}
			name := slurmv1alpha1.SlurmNodeName(comp, int32(i))
			if comp == slurmv1alpha1.ComponentWorker {
				name = slurmName(p)
			}
			out = append(out, base.NodeAddress{Name: name, Pod: p.Name, IP: p.Status.PodIP})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// clusterOfPod maps a pod of a cluster to its SlurmCluster.
func clusterOfPod(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[base.LabelInstance]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// podAddressChanged lets through the pod events that change a node name's address: a pod
// getting, changing or losing its address, and a pod with one going.
func podAddressChanged() predicate.Predicate {
	ip := func(o client.Object) string {
		if p, ok := o.(*corev1.Pod); ok {
			return p.Status.PodIP
		}
		return ""
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return ip(e.Object) != "" },
		DeleteFunc: func(e event.DeleteEvent) bool { return ip(e.Object) != "" },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return ip(e.ObjectOld) != ip(e.ObjectNew) || podStateChanged(e.ObjectOld, e.ObjectNew)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// podStateChanged reports a change the operator acts on besides the address: the pod is being
// deleted (a stranded worker), it cannot start or can again (a pending worker), its slurmd
// registered (a worker that never ran), or its slurmctld stops, or no longer stops, on a state
// file it cannot read.
func podStateChanged(oldObj, newObj client.Object) bool {
	o, ok1 := oldObj.(*corev1.Pod)
	n, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return false
	}
	return o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
		fmt.Sprint(pendingWorkers([]corev1.Pod{*o}, anyPod)) != fmt.Sprint(pendingWorkers([]corev1.Pod{*n}, anyPod)) ||
		slurmdNeverRegistered(*o) != slurmdNeverRegistered(*n) ||
		fmt.Sprint(stateUnreadable([]corev1.Pod{*o})) != fmt.Sprint(stateUnreadable([]corev1.Pod{*n}))
}

func anyPod(corev1.Pod) bool { return true }

var _ handler.MapFunc = clusterOfPod
