package controller

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// labelBusyWorkers asks Slurm which workers run jobs (unless this reconcile already did) and
// sets the busy label on their pods, which the busy PodDisruptionBudget selects: evictions of
// those pods are refused. A worker whose node Slurm's answer does not account for counts as
// busy. When Slurm cannot be asked at all, the labels stay as they are. A label is written only
// when it changes.
func (r *SlurmClusterReconciler) labelBusyWorkers(ctx context.Context, s *reconcileScope) error {
	sc, o := s.desired, s.facts
	nodes := o.slurmNodes
	if !o.slurmReached {
		var err error
		nodes, err = r.slurmFor(s).Nodes(ctx)
		switch {
		case errors.Is(err, slurm.ErrIncompleteAnswer):
			nodes = nil // nothing is accounted for: every worker counts as busy
		case err != nil:
			return nil
		default:
			o.slurmNodes, o.slurmReached = nodes, true
		}
	}
	busy := map[string]bool{}
	for _, n := range nodes {
		busy[n.Name] = n.Busy()
	}
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil {
		return fmt.Errorf("list worker pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		want := "false"
		if b, known := busy[slurmName(*p)]; b || !known {
			want = "true"
		}
		if p.Labels[base.LabelBusy] == want {
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[base.LabelBusy] = want
		if err := r.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("label pod %s busy=%s: %w", p.Name, want, err)
		}
	}
	return nil
}
