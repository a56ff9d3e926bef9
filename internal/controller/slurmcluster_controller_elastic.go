package controller

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/autoscale"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// decideElastic plans an elastic set (autoscaling on) whose pods do not exceed maxSize: every
// node up to maxSize stays in slurm.conf, and the pods follow Slurm's power states
// (autoscale.Decide). Nodes below the highest pod that Slurm holds powered down are asked up
// first; idle nodes at the top are asked down, and lose their pods once Slurm has them powering
// down with nothing on them. When Slurm cannot be asked, or will not take a power-up, the pods
// stay as they are.
func (r *SlurmClusterReconciler) decideElastic(ctx context.Context, set slurmv1alpha1.WorkerSet, api SlurmAPI, current int32, o *observed) (scaling, error) {
	a := set.Worker.Autoscaling
	o.elastic = true
	keep := scaling{replicas: a.MaxSize, pods: map[string]int32{set.Name: current}}
	nodes, err := api.Nodes(ctx)
	if err != nil {
		log.FromContext(ctx).Info("keeping the elastic set's pods until Slurm can be asked", "set", set.Name, "pods", current, "error", err.Error())
		return keep, nil
	}
	o.slurmNodes, o.slurmReached = nodes, true
	byName := map[string]slurm.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	s := autoscale.Set{Name: set.Name, MinSize: a.MinSize, MaxSize: a.MaxSize, IdleTimeout: a.IdleTimeout()}
	plan := autoscale.Decide(s, byName, current, now())
	for _, name := range plan.PowerUp {
		if err := api.SetPower(ctx, name, true); err != nil {
			log.FromContext(ctx).Info("keeping the elastic set's pods: Slurm did not take a power-up", "node", name, "error", err.Error())
			return keep, nil
		}
	}
	for _, name := range plan.PowerDown {
		if err := api.SetPower(ctx, name, false); err != nil {
			log.FromContext(ctx).Info("powering an idle node down failed; trying again on the next look", "node", name, "error", err.Error())
			break
		}
		log.FromContext(ctx).Info("powered down an idle node", "node", name, "idleTimeout", s.IdleTimeout)
	}
	if plan.Pods != current {
		log.FromContext(ctx).Info("elastic set follows Slurm's power states", "set", set.Name, "pods", fmt.Sprintf("%d → %d", current, plan.Pods),
			"up", plan.Up, "poweringUp", plan.PoweringUp, "poweredDown", plan.Down, "resumeFailed", plan.Failed)
	}
	if o.power == nil {
		o.power = map[string]autoscale.Plan{}
	}
	o.power[set.Name] = plan
	return scaling{replicas: a.MaxSize, pods: map[string]int32{set.Name: plan.Pods}}, nil
}
