package controller

import (
	"context"
	"net"

	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// followPodAddresses tells slurmctld the address of every worker pod whose Slurm node it
// reaches at another one. slurmctld resolves a node's NodeAddr (the pod's name) once and keeps
// the address; a pod replaced under the same name (a rollout, an eviction, a crash, a lost
// Kubernetes node) comes back with a new one, and slurmctld would keep sending to the old one
// until the node is marked not responding, its jobs waiting for it forever. One update per
// moved node, and only for it: no reconfigure, no other node touched (docs/scaling.md, "A
// replaced worker"). A reconfigure resolves every name afresh and sets the names back, which
// the next reconcile turns into addresses again.
//
// Errors leave the addresses as they are until the next reconcile: what Slurm does then is
// what it did before this phase existed.
func (r *SlurmClusterReconciler) followPodAddresses(ctx context.Context, s *reconcileScope) error {
	sc := s.desired
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil || len(pods.Items) == 0 {
		return nil
	}
	nodes, err := r.slurmFor(s).Nodes(ctx)
	if err != nil {
		return nil
	}
	s.facts.slurmNodes, s.facts.slurmReached = nodes, true
	addr := map[string]string{}
	for _, n := range nodes {
		addr[n.Name] = n.Address
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		name := slurmName(*p)
		have, listed := addr[name]
		// A pod on its way out keeps its address until its slurmd is gone; one without an
		// address yet, or whose node Slurm does not list, has nothing to follow.
		if !listed || p.Status.PodIP == "" || !p.DeletionTimestamp.IsZero() || net.ParseIP(p.Status.PodIP) == nil || have == p.Status.PodIP {
			continue
		}
		if err := r.slurmFor(s).SetAddress(ctx, name, p.Status.PodIP); err != nil {
			log.FromContext(ctx).Error(err, "tell slurmctld a worker's address", "node", name, "pod", p.Name, "address", p.Status.PodIP)
			continue
		}
		log.FromContext(ctx).V(1).Info("set a worker's address in Slurm", "node", name, "pod", p.Name, "address", p.Status.PodIP, "was", have)
	}
	return nil
}
