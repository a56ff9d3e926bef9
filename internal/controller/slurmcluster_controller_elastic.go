package controller

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
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
func (r *SlurmClusterReconciler) decideElastic(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, set slurmv1alpha1.WorkerSet, api SlurmAPI, current int32, o *observed) (scaling, error) {
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
	r.followResumes(ctx, sc, s, byName, api)
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
	r.markPodsThatCannotStart(ctx, sc, s, api)
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

// markPodsThatCannotStart comments in Slurm the set's nodes being powered up whose pods
// Kubernetes cannot start or refused to create (refusedInSet), with its words, and clears
// those comments once the pods are placed or gone (autoscale.CannotStart); the jobs waiting for
// those nodes get the words as their admin comment (autoscale.JobComments). It reads Slurm's
// nodes again: the power changes above may have changed them. Errors wait for the next look.
func (r *SlurmClusterReconciler) markPodsThatCannotStart(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, s autoscale.Set, api SlurmAPI) {
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil {
		return
	}
	why := map[string]string{}
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: sc.WorkerSetStatefulSetName(s.Name)}, sts); err == nil {
		why = r.refusedInSet(ctx, s.Name, s.MaxSize, sts, pods.Items)
		if why == nil {
			why = map[string]string{}
		}
	}
	for _, p := range podsOfSet(pods.Items, s.Name) {
		if w := cannotStart(p); w != "" {
			why[slurmName(p)] = w
		}
	}
	nodes, err := api.Nodes(ctx)
	if err != nil {
		return
	}
	byName := make(map[string]slurm.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	comments := autoscale.CannotStart(s, byName, why)
	for name, comment := range comments {
		log.FromContext(ctx).Info("an elastic node's pod cannot start: saying so in Slurm", "node", name, "comment", comment)
		if err := api.SetNodeComment(ctx, name, comment); err != nil {
			log.FromContext(ctx).Info("commenting an elastic node failed; trying again on the next look", "node", name, "error", err.Error())
		}
	}
	waiting := autoscale.WaitingNodes(s, byName, comments)
	if len(waiting) == 0 {
		return
	}
	jobs, err := api.Jobs(ctx)
	if err != nil {
		return
	}
	for id, comment := range autoscale.JobComments(s, waiting, jobs) {
		log.FromContext(ctx).Info("a job waits for an elastic node's pod: saying so on the job", "job", id, "adminComment", comment)
		if err := api.SetJobAdminComment(ctx, id, comment); err != nil {
			log.FromContext(ctx).Info("commenting a waiting job failed; trying again on the next look", "job", id, "error", err.Error())
		}
	}
}

// clearCannotStartComments takes the pod-cannot-start comments off fixed sets' nodes: a set
// whose autoscaling was turned off while a pod could not start powers no node up, so no such
// comment stays true there (autoscale.CannotStart with no pod to speak of). A down node keeps
// its comment, which explains the failed resume, until it is resumed. It reads the node list
// this reconcile already read, and nothing when Slurm was not reached; errors wait for the next
// look.
func (r *SlurmClusterReconciler) clearCannotStartComments(ctx context.Context, s *reconcileScope) error {
	if !s.facts.slurmReached {
		return nil
	}
	byName := make(map[string]slurm.Node, len(s.facts.slurmNodes))
	for _, n := range s.facts.slurmNodes {
		byName[n.Name] = n
	}
	for _, set := range s.desired.WorkerSets() {
		if set.Worker.Elastic() {
			continue
		}
		for name, comment := range autoscale.CannotStart(autoscale.Set{Name: set.Name, MaxSize: set.Worker.NodeCount()}, byName, nil) {
			log.FromContext(ctx).Info("a fixed set's node keeps no pod-cannot-start comment: clearing it", "node", name)
			if err := r.slurmFor(s).SetNodeComment(ctx, name, comment); err != nil {
				log.FromContext(ctx).Info("clearing a node's comment failed; trying again on the next look", "node", name, "error", err.Error())
			}
		}
	}
	return nil
}

// followResumes takes one look at the set's power-ups (autoscale.Resumes) and records how those
// that ended went: a failed one counts a failure; the jobs that nodes came up for add their
// wait from submit to ready (the job list is read only while such a node awaits its jobs).
func (r *SlurmClusterReconciler) followResumes(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, s autoscale.Set, nodes map[string]slurm.Node, api SlurmAPI) {
	v, _ := r.resumes.LoadOrStore(sc.Namespace+"/"+sc.Name+"/"+s.Name, &autoscale.Resumes{})
	resumes := v.(*autoscale.Resumes)
	for _, e := range resumes.Observe(s, nodes, now()) {
		if e.Failed {
			elasticResumeFailures.WithLabelValues(sc.Namespace, sc.Name, s.Name).Inc()
			log.FromContext(ctx).Info("an elastic node's power-up failed: Slurm holds it down", "node", e.Node, "poweringUpSince", e.Since)
		}
	}
	if !resumes.AwaitingJobs() {
		return
	}
	jobs, err := api.Jobs(ctx)
	if err != nil {
		log.FromContext(ctx).Info("nodes came up but the jobs they were powered up for could not be read; trying again on the next look", "set", s.Name, "error", err.Error())
		return
	}
	for _, waited := range resumes.Waits(jobs) {
		elasticResumeWait.WithLabelValues(sc.Namespace, sc.Name, s.Name).Observe(waited.Seconds())
	}
}

// forgetResumes drops a deleted cluster's power-ups.
func (r *SlurmClusterReconciler) forgetResumes(namespace, name string) {
	prefix := namespace + "/" + name + "/"
	r.resumes.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			r.resumes.Delete(k)
		}
		return true
	})
}
