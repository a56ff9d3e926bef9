package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// reconcileScope is what one reconcile of one SlurmCluster knows. The phases fill it in, in
// order; the status is computed from it at the end, whichever phase stopped the reconcile.
type reconcileScope struct {
	// cluster is the object as read; its status is patched from what follows.
	cluster *slurmv1alpha1.SlurmCluster
	// desired is cluster with the defaults filled in; phases read the spec from it.
	desired *slurmv1alpha1.SlurmCluster
	facts   *observed
	keys    base.Keys
	parts   []render.Part
	// keep are the components whose live objects stay as they are this time (not rendered, so
	// not pruned either).
	keep []slurmv1alpha1.Component
	// requeueAfter asks for a timed look although nothing failed.
	requeueAfter time.Duration
	// renewIn, when positive, is when the exporter's token is due for renewal: the reconcile
	// looks again by then whatever else it waits for.
	renewIn time.Duration
	// slurm is this reconcile's Slurm client (see slurmFor), made on first use.
	slurm *slurmOnce
	// fresh holds the children this reconcile applied, as the API server answered: the cache
	// may not have them yet when the children are observed.
	fresh map[freshKey]*unstructured.Unstructured
	// written are the children this reconcile wrote.
	written map[freshKey]bool
}

// noteWritten records that the reconcile wrote obj.
func (s *reconcileScope) noteWritten(obj client.Object) {
	if s.written == nil {
		s.written = map[freshKey]bool{}
	}
	s.written[freshKey{kind: obj.GetObjectKind().GroupVersionKind().Kind, name: obj.GetName()}] = true
}

type freshKey struct {
	kind, name string
}

// remember keeps an object the reconcile applied (nil: nothing was applied).
func (s *reconcileScope) remember(obj *unstructured.Unstructured) {
	if obj == nil {
		return
	}
	if s.fresh == nil {
		s.fresh = map[freshKey]*unstructured.Unstructured{}
	}
	s.fresh[freshKey{obj.GetKind(), obj.GetName()}] = obj
}

// freshest fills obj with the child named so: as this reconcile applied it, or else from the
// cache (which may not show this reconcile's writes yet). It reports whether the child exists.
func (r *SlurmClusterReconciler) freshest(ctx context.Context, s *reconcileScope, kind, name string, obj client.Object) (bool, error) {
	if u, ok := s.fresh[freshKey{kind, name}]; ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			return false, fmt.Errorf("read the applied %s %s: %w", kind, name, err)
		}
		return true, nil
	}
	return r.getOptional(ctx, types.NamespacedName{Namespace: s.desired.Namespace, Name: name}, obj)
}

// slurmFor returns the reconcile's one Slurm client, made with the cluster's JWT key.
func (r *SlurmClusterReconciler) slurmFor(s *reconcileScope) SlurmAPI {
	if s.slurm == nil {
		s.slurm = &slurmOnce{api: r.slurmClient(s.desired, s.keys.JWT)}
	}
	return s.slurm
}

// phase is one step of a reconcile. A phase that returns errHalt stops the steps after it (a
// state the status explains, such as a spec that cannot be rendered); any other error stops
// them too and is retried with backoff. Phases marked always run even then, since the status
// needs what they read.
type phase struct {
	name   string
	run    func(context.Context, *reconcileScope) error
	always bool
}

// errHalt stops a reconcile without an error: the status says why, and nothing is retried
// before the next change or timed look.
var errHalt = errors.New("halt")

// phases are the steps of a reconcile, in the order they run.
func (r *SlurmClusterReconciler) phases() []phase {
	return []phase{
		{name: "check the policy", run: r.checkPolicy},
		{name: "check the Slurm release", run: r.checkSlurmRelease},
		{name: "check the shared spool", run: r.checkSharedSpool},
		{name: "find leaving node sets", run: r.findLeavingNodeSets},
		{name: "find the GPU shape", run: r.findGPUShape},
		{name: "ensure keys", run: r.ensureKeys},
		{name: "renew the exporter's token", run: r.exporterToken},
		{name: "plan workers", run: r.planWorkers},
		{name: "render", run: r.renderChildren},
		{name: "hold a jail overwrite", run: r.holdJailOverwrite},
		{name: "apply", run: r.applyAll},
		{name: "prune", run: r.prune},
		{name: "nudge config readers", run: r.nudgeConfigReaders},
		{name: "observe children", run: r.observeChildren, always: true},
		{name: "follow pod addresses", run: r.followPodAddresses},
		{name: "find stranded workers", run: r.findStrandedWorkers},
		{name: "update workers", run: r.rollWorkers},
		{name: "follow node health", run: r.followNodeHealth},
		{name: "run active checks", run: r.runActiveChecks},
		{name: "label busy workers", run: r.labelBusyWorkers},
		{name: "clear stale pod comments", run: r.clearCannotStartComments},
	}
}

// runPhases runs the phases and records in the scope's facts where and why they stopped. The
// error returned is for the work queue's backoff.
func (r *SlurmClusterReconciler) runPhases(ctx context.Context, s *reconcileScope) error {
	var stopped error
	for _, p := range r.phases() {
		if stopped != nil && !p.always {
			continue
		}
		log.FromContext(ctx).V(1).Info("phase", "phase", p.name)
		start := time.Now()
		err := p.run(ctx, s)
		observePhase(p.name, time.Since(start), err)
		switch {
		case err == nil:
		case errors.Is(err, errHalt):
			if stopped == nil {
				stopped = errHalt
			}
		case stopped == nil:
			stopped = fmt.Errorf("%s: %w", p.name, err)
			if !apierrors.IsConflict(err) {
				// A conflict is a stale cache, gone at the next try; anything else is said.
				s.facts.phaseErr = stopped
			}
		default:
			s.facts.childrenUnknown = true
		}
		if p.name == "observe children" && err != nil {
			s.facts.childrenUnknown = true
		}
	}
	if errors.Is(stopped, errHalt) {
		return nil
	}
	return stopped
}

// DefaultSlurmPollInterval is how often a cluster whose slurmctld answers is looked at again:
// a worker that starts a job is labelled busy (and so protected from evictions) within it. One
// node list per look costs slurmctld about 33 ms at 1,000 nodes (docs/performance.md).
const DefaultSlurmPollInterval = 15 * time.Second

// ElasticPollInterval is how often a cluster with an elastic set (autoscaling) is looked at:
// the longest a node Slurm powers up for a job waits for the operator to make its pod.
const ElasticPollInterval = 5 * time.Second

// result is when to look again after a reconcile that returned no error.
func (s *reconcileScope) result(poll time.Duration) ctrl.Result {
	f := s.facts
	switch {
	case s.requeueAfter > 0:
		return ctrl.Result{RequeueAfter: s.requeueAfter}
	case f.scaling.active || f.rollout.active || len(f.applyErrs) > 0:
		// Jobs end and nodes drain without any Kubernetes event; a child the API refused may
		// be accepted once what it depends on changes: look again soon.
		return ctrl.Result{RequeueAfter: 10 * time.Second}
	case f.slurmReached:
		// Jobs start and end without a Kubernetes event: refresh busy labels and counts.
		if poll == 0 {
			poll = DefaultSlurmPollInterval
		}
		if len(f.power) > 0 {
			// Slurm's power-ups reach the operator only as node states: a waiting job's pods
			// are made within ElasticPollInterval.
			poll = min(poll, ElasticPollInterval)
		}
		return ctrl.Result{RequeueAfter: poll}
	case f.elastic:
		// An elastic set follows Slurm's node states, which no Kubernetes event announces: keep
		// asking until slurmctld answers.
		return ctrl.Result{RequeueAfter: DefaultSlurmPollInterval}
	case !f.settled() || f.databaseErr != "" || f.identityErr != "" || f.priorityClassMissing != "":
		// Pods, load balancers and Jobs change without touching our objects' specs, and the
		// database password's and SSSD's Secrets and PriorityClasses are not watched: look again.
		return ctrl.Result{RequeueAfter: 30 * time.Second}
	}
	return ctrl.Result{}
}

// renderChildren renders every child. The worker count rendered is the planned one, which
// keeps leaving workers (in the StatefulSet and in slurm.conf) until they are drained.
func (r *SlurmClusterReconciler) renderChildren(ctx context.Context, s *reconcileScope) error {
	workers := s.facts.scaling.replicas
	in := base.Input{Cluster: s.desired, Workers: &workers, Keys: s.keys, ClusterDomain: r.ClusterDomain, GPU: s.facts.gpu.GPU, Operator: r.Operator,
		SetWorkers: s.facts.scaling.sets, SetPods: s.facts.scaling.pods}
	for set, g := range s.facts.setGPUs {
		if in.SetGPUs == nil {
			in.SetGPUs = map[string]base.GPU{}
		}
		in.SetGPUs[set] = g.GPU
	}
	var err error
	if in.ControlPlanePriorityClass, s.facts.priorityClassMissing, err = r.controlPlanePriorityClass(ctx); err != nil {
		return err
	}
	if in.NodeAddresses, err = r.nodeAddresses(ctx, s.desired); err != nil {
		return err
	}
	if in.Placements, err = r.workerPlacements(ctx, s.desired); err != nil {
		return err
	}
	if in.Optional, err = r.optionalAPIs(ctx, s.facts); err != nil {
		return err
	}
	r.accountingDatabase(ctx, &in, s.facts)
	if s.facts.databaseErr != "" {
		s.keep = append(s.keep, slurmv1alpha1.ComponentAccounting)
	}
	parts, err := render.All(in)
	if err != nil {
		s.facts.renderErr = err
		return errHalt
	}
	if len(in.NodeAddresses) == 0 {
		// No pod has an address yet (a new cluster), or none has now: the node names wait, and
		// what was applied before stays. Creating a cluster writes two objects fewer.
		parts = withoutComponent(parts, render.NodeNamesComponent)
		s.keep = append(s.keep, render.NodeNamesComponent)
	}
	s.facts.renderWarnings = render.Warnings(in)
	s.parts = parts
	return nil
}

// checkPolicy halts, before anything is generated or applied, a spec the operator's policy
// does not allow; the status names the field.
func (r *SlurmClusterReconciler) checkPolicy(_ context.Context, s *reconcileScope) error {
	if err := r.Policy.Check(s.desired); err != nil {
		s.facts.renderErr, s.facts.renderReason = err, slurmv1alpha1.ReasonPolicyViolation
		return errHalt
	}
	return nil
}
