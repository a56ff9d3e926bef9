package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// SlurmAPI is what the reconciler asks of slurmctld. *slurm.Client implements it.
type SlurmAPI interface {
	Nodes(ctx context.Context) ([]slurm.Node, error)
	Drain(ctx context.Context, name, why string) error
	ResumeIfOwned(ctx context.Context, name string) (bool, error)
	SetAddress(ctx context.Context, name, address string) error
	SetPower(ctx context.Context, name string, up bool) error
	Jobs(ctx context.Context) ([]slurm.Job, error)
	SetNodeComment(ctx context.Context, name, comment string) error
	SetJobAdminComment(ctx context.Context, id int64, comment string) error
}

// SlurmClientFunc returns the Slurm client of a cluster, given its JWT key.
type SlurmClientFunc func(sc *slurmv1alpha1.SlurmCluster, jwtKey []byte) SlurmAPI

// scaling is what the scale-down phase decided.
type scaling struct {
	// replicas is the worker count to render now: the spec's size, or more while nodes above it
	// still run jobs (or Slurm cannot be asked).
	replicas int32
	// sets is replicas for each node set, by set.
	sets map[string]int32
	// pods is the pod count of each elastic set, by set (replicas and sets count its nodes).
	pods map[string]int32
	// active is true while a scale-down waits; reason and message go into ScalingDown.
	active          bool
	reason, message string
}

// slurmErrorReason is the condition reason for a failed question to Slurm: an answer that does
// not account for the nodes, or no answer.
func slurmErrorReason(err error) string {
	if errors.Is(err, slurm.ErrIncompleteAnswer) {
		return slurmv1alpha1.ReasonSlurmAnswerIncomplete
	}
	return slurmv1alpha1.ReasonSlurmUnreachable
}

func (r *SlurmClusterReconciler) slurmClient(sc *slurmv1alpha1.SlurmCluster, key []byte) SlurmAPI {
	if r.SlurmClient != nil {
		return r.SlurmClient(sc, key)
	}
	return slurm.NewClient(render.RestdURL(sc, r.ClusterDomain), key)
}

// planWorkers puts into the scope how many workers of each set to render (see decideScaling).
// Each set scales on its own; the ScalingDown condition tells of every set that waits.
func (r *SlurmClusterReconciler) planWorkers(ctx context.Context, s *reconcileScope) error {
	api, prev := r.slurmFor(s), &s.cluster.Status
	var plan scaling
	var reasons, messages []string
	for _, set := range s.desired.WorkerSets() {
		p, err := r.decideScaling(ctx, s.desired, set, api, prev, s.facts)
		if err != nil {
			s.facts.scalingDecided = false
			return err
		}
		if set.Worker.Elastic() {
			// An elastic set's pods are its plan's; while maxSize shrinks below them (the
			// generic drain-first path), one per node.
			pods, ok := p.pods[set.Name]
			if !ok {
				pods = p.replicas
			}
			if plan.pods == nil {
				plan.pods = map[string]int32{}
			}
			plan.pods[set.Name] = pods
		}
		if set.Default() {
			plan.replicas = p.replicas
		} else {
			if plan.sets == nil {
				plan.sets = map[string]int32{}
			}
			plan.sets[set.Name] = p.replicas
		}
		if p.active {
			plan.active = true
			reasons, messages = append(reasons, p.reason), append(messages, p.message)
		}
	}
	if plan.active {
		// The first waiting set's reason: a set that cannot ask Slurm says so first.
		plan.reason, plan.message = reasons[0], strings.Join(messages, "; ")
	} else {
		r.resumeCancelledScaleDown(ctx, s.desired, api, prev, s.facts)
	}
	s.facts.scaling, s.facts.scalingDecided = plan, true
	return nil
}

// decideScaling decides how many workers of a set to render. Scaling up is immediate. Scaling
// down never removes a worker that may run a job: the nodes above the new size are drained in
// Slurm with the operator's reason, and the StatefulSet (and the node list) shrink only once
// every one of them is drained and idle, or down. When Slurm cannot be asked, nothing shrinks
// (fail closed).
func (r *SlurmClusterReconciler) decideScaling(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, set slurmv1alpha1.WorkerSet, api SlurmAPI, prev *slurmv1alpha1.SlurmClusterStatus, o *observed) (scaling, error) {
	want := set.Worker.NodeCount()
	live := &appsv1.StatefulSet{}
	found, err := r.getOptional(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: sc.WorkerSetStatefulSetName(set.Name)}, live)
	if err != nil {
		return scaling{}, err
	}
	current := int32(0)
	if found && live.Spec.Replicas != nil {
		current = *live.Spec.Replicas
	}
	if set.Worker.Elastic() && current <= want {
		return r.decideElastic(ctx, sc, set, api, current, o)
	}
	if current <= want {
		return scaling{replicas: want}, nil
	}
	first, last := fmt.Sprintf("%s-%d", set.Name, want), fmt.Sprintf("%s-%d", set.Name, current-1)

	closed := scaling{replicas: current, active: true}
	nodes, err := api.Nodes(ctx)
	if err != nil {
		closed.reason = slurmErrorReason(err)
		closed.message = fmt.Sprintf("keeping %d workers until Slurm can be asked which of %s…%s run jobs: %v", current, first, last, err)
		return closed, nil
	}
	o.slurmNodes, o.slurmReached = nodes, true
	neverRan, err := r.workersThatNeverRan(ctx, sc)
	if err != nil {
		return scaling{}, err
	}
	missing := slurm.Missing(nodes, setNodeNames(set.Name, current))
	// A leaving worker whose slurmd never started (its pod Pending, unschedulable, or its
	// image not pulled) and that Slurm does not list cannot run a job: it needs no drain and
	// holds nothing back. Fail closed on what may run jobs, not on what cannot.
	missing = slices.DeleteFunc(missing, func(name string) bool {
		return !withinSize(sc, name) && neverRan[name]
	})
	if len(missing) > 0 {
		closed.reason = slurmv1alpha1.ReasonSlurmAnswerIncomplete
		closed.message = fmt.Sprintf("keeping %d workers: slurmctld's answer lacks %s, which slurm.conf lists; a node Slurm does not account for may run jobs", current, strings.Join(missing, ", "))
		return closed, nil
	}
	byName := map[string]slurm.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var waiting []string
	for i := want; i < current; i++ {
		name := fmt.Sprintf("%s-%d", set.Name, i)
		n, listed := byName[name]
		if !listed {
			continue // never ran (above): nothing to drain or wait for
		}
		// A node that is drained, down or failed already keeps its state and reason (an
		// admin's): it leaves once it runs nothing.
		if !n.Has("DRAIN") && !n.Down() && !n.Has("FAIL") {
			if err := api.Drain(ctx, name, slurmfacts.DrainScaleDown); err != nil {
				closed.reason = slurmv1alpha1.ReasonSlurmUnreachable
				closed.message = fmt.Sprintf("keeping %d workers: draining %s failed: %v", current, name, err)
				return closed, nil
			}
			log.FromContext(ctx).Info("drained for scale-down", "node", name)
			waiting = append(waiting, name)
			continue
		}
		if !(n.Drained() || (n.Down() && !n.Busy())) {
			waiting = append(waiting, name)
		}
	}
	if len(waiting) > 0 {
		if expired, since := graceExpired(set.Worker, prev, now()); expired {
			log.FromContext(ctx).Info("scale-down grace period over: removing workers that still run jobs", "nodes", waiting, "waited", since)
			r.event(sc, corev1.EventTypeWarning, slurmv1alpha1.EventScaleDownGraceExpired, slurmv1alpha1.ConditionScalingDown, fmt.Sprintf("spec.slurmNodes.worker.scaleDownGracePeriodSeconds passed after %s: removing %s with their jobs", since.Round(time.Second), strings.Join(waiting, ", ")))
			return scaling{replicas: want, active: true, reason: slurmv1alpha1.ReasonGracePeriodExpired,
				message: fmt.Sprintf("scaling %d → %d: the grace period passed; removing %s with their jobs", current, want, strings.Join(waiting, ", "))}, nil
		}
		closed.reason = slurmv1alpha1.ReasonWaitingForJobs
		closed.message = fmt.Sprintf("scaling %d → %d: waiting for the jobs on %s to end (drained, no new jobs start there)", current, want, strings.Join(waiting, ", "))
		return closed, nil
	}
	return scaling{replicas: want, active: true, reason: slurmv1alpha1.ReasonRemovingNodes,
		message: fmt.Sprintf("scaling %d → %d: %s…%s are drained and idle; removing them", current, want, first, last)}, nil
}

// workersThatNeverRan are the Slurm names of the workers whose pod exists and whose slurmd has
// never been heard by slurmctld: the pod is Pending (unschedulable, its claims unbound), its
// image cannot be pulled, or slurmd is still waiting for slurmctld to list its node. Such a
// worker cannot have run a job. A worker with no pod at all is not in the list: the
// StatefulSet may be about to make it, and the answer for it is Slurm's.
func (r *SlurmClusterReconciler) workersThatNeverRan(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) (map[string]bool, error) {
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil {
		return nil, fmt.Errorf("list worker pods: %w", err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if slurmdNeverRegistered(p) {
			out[slurmName(p)] = true
		}
	}
	return out, nil
}

// slurmdNeverRegistered reports whether the pod's slurmd container has never passed its
// startup probe (slurmctld hears from the node) in its first and only run. The kubelet keeps a
// container's started flag true for the rest of its run once the probe passed, so unlike
// readiness, it cannot be false for a worker that ran jobs and then stopped answering.
func slurmdNeverRegistered(p corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != "slurmd" {
			continue
		}
		return (c.Started == nil || !*c.Started) && c.RestartCount == 0 && c.State.Terminated == nil &&
			c.LastTerminationState.Running == nil && c.LastTerminationState.Terminated == nil
	}
	return true
}

// resumeCancelledScaleDown lifts the operator's scale-down drains of nodes that are within the
// size again (the size went back up before they were removed). Only after a scale-down was in
// progress, and only drains the operator set; errors wait for the next reconcile.
func (r *SlurmClusterReconciler) resumeCancelledScaleDown(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, client SlurmAPI, prev *slurmv1alpha1.SlurmClusterStatus, o *observed) {
	if !meta.IsStatusConditionTrue(prev.Conditions, slurmv1alpha1.ConditionScalingDown) {
		return
	}
	nodes, err := client.Nodes(ctx)
	if err != nil {
		return
	}
	o.slurmNodes, o.slurmReached = nodes, true
	for _, n := range nodes {
		// Nodes at or above the size are leaving (or gone): their drain stays.
		if !withinSize(sc, n.Name) {
			continue
		}
		if n.OwnedDrain() && n.Reason == slurmfacts.DrainScaleDown {
			if _, err := client.ResumeIfOwned(ctx, n.Name); err != nil {
				log.FromContext(ctx).Error(err, "resume a node whose scale-down was cancelled", "node", n.Name)
			}
		}
	}
}

// now is the clock of the scale-down grace period (a variable so tests of pure logic could fix
// it; the controller tests use the real one).
var now = time.Now

// graceExpired reports whether the scale-down has waited longer than
// spec.slurmNodes.worker.scaleDownGracePeriodSeconds. The wait started when ScalingDown turned
// True (its last transition), so no extra state is kept.
func graceExpired(w slurmv1alpha1.Worker, prev *slurmv1alpha1.SlurmClusterStatus, t time.Time) (bool, time.Duration) {
	grace := w.ScaleDownGracePeriodSeconds
	c := findCondition(prev, slurmv1alpha1.ConditionScalingDown)
	if grace == nil || !meta.IsStatusConditionTrue(prev.Conditions, slurmv1alpha1.ConditionScalingDown) {
		return false, 0
	}
	since := t.Sub(c.LastTransitionTime.Time)
	return since >= time.Duration(*grace)*time.Second, since
}
