package controller

import (
	"maps"
	"slices"
	"time"

	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/autoscale"
	"github.com/slurm-k8s/slurm-operator/internal/gpu"
	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// observed holds what a reconcile learned about the world; the status is computed from it.
type observed struct {
	renderErr error
	// phaseErr is why a phase stopped the reconcile (an API error, say), with the phase's name.
	phaseErr error
	// applyErrs name each child the API server refused, with its message.
	applyErrs []string
	// childrenUnknown is true when the children could not be read: their conditions keep what
	// they said before.
	childrenUnknown bool
	// renderWarnings are spec values the render did not use (Degraded says which).
	renderWarnings []string
	// identityErr says why the SSSD Secret (spec.identity) cannot be read while the pods run
	// with the one they mounted; identityReason is its condition reason.
	identityErr, identityReason string
	// priorityClassMissing says why the control-plane PriorityClass was left out of the pods.
	priorityClassMissing string
	// renderReason is the condition reason of renderErr (slurmv1alpha1.ReasonRenderFailed when empty).
	renderReason string
	gpu          gpu.Result
	scaling      scaling
	rollout      rollout
	// scalingDecided and rolloutDecided say that the plan and update phases ran to the end,
	// so that scaling and rollout say what is going on.
	scalingDecided, rolloutDecided bool
	// upgrade says whether a change of Slurm release waits for an earlier stage, once
	// upgradeDecided (the release check ran).
	upgrade        slurmUpgrade
	upgradeDecided bool
	// slurmNodes is Slurm's node list, when this reconcile asked slurmctld.
	slurmNodes []slurm.Node
	// power is each elastic set's plan, by set, when Slurm was asked; elastic says that the
	// cluster has an elastic set whose pods follow Slurm.
	power   map[string]autoscale.Plan
	elastic bool
	// checksDecided is true when the active checks' phase ran: activeChecks is then the
	// status.activeChecks to write, and nextCheck holds when a check runs again on each worker
	// that check drained.
	checksDecided bool
	activeChecks  []slurmv1alpha1.ActiveCheckStatus
	nextCheck     map[string]time.Time
	slurmReached  bool
	// pendingWorkers name the worker pods the size wants that cannot start, and why.
	pendingWorkers []string
	// refusedWorkers are the worker pods the size wants that Kubernetes refused to create,
	// by Slurm node name, with its words ("FailedCreate: ...").
	refusedWorkers map[string]string
	// unhealthyNodeWorkers name the worker pods that are not ready on a Kubernetes node that
	// is not sound (not ready: lost, shut down or cut off; cordoned; short of GPUs), with the
	// node and what is wrong with it.
	unhealthyNodeWorkers []string
	// stranded are worker pods whose deletion waits for a lost Kubernetes node.
	stranded []strandedPod
	// stateUnreadable names the controller pods whose slurmctld stops because it cannot read
	// its state, with slurmctld's words.
	stateUnreadable []string

	mariaDBAPI, serviceMonitorAPI bool
	// databaseErr says why the accounting database cannot be used (a missing Secret, say), and
	// databaseReason is the matching condition reason.
	databaseErr, databaseReason string

	controller, worker, login, accounting *appsv1.StatefulSet
	// backups is the scheduled backups' CronJob, when spec.backups asks for one and it exists.
	backups *batchv1.CronJob
	// nodeSets are the StatefulSets of the node sets (not spec.slurmNodes.worker's), by set.
	nodeSets map[string]*appsv1.StatefulSet
	// leavingSets are the node sets that left the spec while their workers still drain
	// (findLeavingNodeSets): the desired spec has them back with size 0.
	leavingSets []string
	// setGPUs is the GPU shape of each node set, by set (gpu is spec.slurmNodes.worker's).
	setGPUs     map[string]gpu.Result
	populateJob *batchv1.Job
	// jailHeld says why an overwrite of the jail waits (pods still run in it).
	jailHeld     string
	loginService *corev1.Service
}

// troubled reports whether the reconcile found something the status must say at once: a spec
// that cannot be rendered, a failed phase or apply, an unusable database or SSSD Secret,
// children unread.
func (o *observed) troubled() bool {
	return o.renderErr != nil || o.phaseErr != nil || len(o.applyErrs) > 0 || o.databaseErr != "" || o.identityErr != "" || o.childrenUnknown
}

// settled reports whether nothing is still on its way (pods starting, a Job running, a load
// balancer address pending), so no timed look is needed.
func (o *observed) settled() bool {
	for _, s := range o.statefulSets() {
		if s != nil && !statefulSetReady(s) {
			return false
		}
	}
	if o.populateJob != nil && !jobFinished(o.populateJob) {
		return false
	}
	if o.loginService != nil && o.loginService.Spec.Type == corev1.ServiceTypeLoadBalancer && len(o.loginService.Status.LoadBalancer.Ingress) == 0 {
		return false
	}
	return true
}

// optionalAPIs says which optional APIs are served: the watcher's answer from memory, or,
// for a reconciler that was not set up with a manager, the REST mapper's.
func (r *SlurmClusterReconciler) optionalAPIs(ctx context.Context, o *observed) (base.OptionalAPIs, error) {
	var apis base.OptionalAPIs
	if r.apis != nil {
		var err error
		if apis, err = r.apis.get(ctx); err != nil {
			return apis, fmt.Errorf("discover optional APIs: %w", err)
		}
	} else {
		served := func(gvk schema.GroupVersionKind) bool {
			_, err := r.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
			return err == nil
		}
		apis = base.OptionalAPIs{MariaDB: served(mariaDBKind), ServiceMonitor: served(serviceMonitorKind)}
	}
	o.mariaDBAPI, o.serviceMonitorAPI = apis.MariaDB, apis.ServiceMonitor
	return apis, nil
}

// accountingDatabase fills in where slurmdbd's database is. When the external database's
// password cannot be read or cannot go into slurmdbd.conf, the accounting objects are neither
// rendered nor pruned (slurmdbd keeps running on the config it has), the reason goes into the
// AccountingAvailable condition, and the rest of the cluster still reconciles.
func (r *SlurmClusterReconciler) accountingDatabase(ctx context.Context, in *base.Input, o *observed) {
	sc := in.Cluster
	acc := sc.Spec.SlurmNodes.Accounting
	if !acc.Enabled {
		return
	}
	if db := acc.ExternalDB; db != nil {
		s := &corev1.Secret{}
		ref := db.PasswordSecretKeyRef
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: ref.Name}, s)
		field := "spec.slurmNodes.accounting.externalDB.passwordSecretKeyRef"
		switch {
		case err == nil && s.Labels[slurmv1alpha1.LabelAllowReference] != "true":
			o.databaseReason = slurmv1alpha1.ReasonDatabaseSecretNotAllowed
			o.databaseErr = "Secret " + ref.Name + " (" + field + ") is not labelled " + slurmv1alpha1.LabelAllowReference + "=true: label it to let SlurmClusters read it"
		case err != nil || len(s.Data[ref.Key]) == 0:
			o.databaseReason = slurmv1alpha1.ReasonDatabaseSecretMissing
			o.databaseErr = "cannot read key " + ref.Key + " of Secret " + ref.Name + " (" + field + ")"
		default:
			db, bad := render.Database(sc, s.Data[ref.Key])
			if bad != nil {
				o.databaseReason = slurmv1alpha1.ReasonDatabasePasswordUnusable
				o.databaseErr = "the password in key " + ref.Key + " of Secret " + ref.Name + " (" + field + ") cannot go into slurmdbd.conf: " + bad.Error()
				break
			}
			in.Database = db
		}
		// Without a password, accounting is not rendered this time, and what exists stays.
		return
	}
	// The generated password is plain letters and digits.
	in.Database, _ = render.Database(sc, in.Keys.DatabasePassword)
}

// observeChildren reads the children whose state the status reports.
func (r *SlurmClusterReconciler) observeChildren(ctx context.Context, s *reconcileScope) error {
	sc, o := s.desired, s.facts
	get := func(name string) (*appsv1.StatefulSet, error) {
		sts := &appsv1.StatefulSet{}
		found, err := r.freshest(ctx, s, "StatefulSet", name, sts)
		if !found {
			return nil, err
		}
		return sts, nil
	}
	var err error
	if o.controller, err = get(sc.ComponentName(slurmv1alpha1.ComponentController)); err != nil {
		return err
	}
	if o.worker, err = get(sc.ComponentName(slurmv1alpha1.ComponentWorker)); err != nil {
		return err
	}
	for _, set := range sc.WorkerSets()[1:] {
		sts, err := get(sc.WorkerSetStatefulSetName(set.Name))
		if err != nil {
			return err
		}
		if sts != nil {
			if o.nodeSets == nil {
				o.nodeSets = map[string]*appsv1.StatefulSet{}
			}
			o.nodeSets[set.Name] = sts
		}
	}
	if o.login, err = get(sc.ComponentName(slurmv1alpha1.ComponentLogin)); err != nil {
		return err
	}
	if sc.Spec.SlurmNodes.Accounting.Enabled {
		if o.accounting, err = get(sc.ComponentName(slurmv1alpha1.ComponentAccounting)); err != nil {
			return err
		}
	}
	if sc.Spec.PopulateJail != nil && sc.Spec.PopulateJail.Image != "" {
		j := &batchv1.Job{}
		found, err := r.freshest(ctx, s, "Job", sc.PopulateJailJobName(), j)
		if err != nil {
			return err
		}
		if found {
			o.populateJob = j
		}
	}
	if sc.Spec.Backups != nil {
		cj := &batchv1.CronJob{}
		found, err := r.freshest(ctx, s, "CronJob", sc.BackupCronJobName(), cj)
		if err != nil {
			return err
		}
		if found {
			o.backups = cj
		}
	}
	svc := &corev1.Service{}
	found, err := r.freshest(ctx, s, "Service", sc.ComponentName(slurmv1alpha1.ComponentLogin), svc)
	if err != nil {
		return err
	}
	if found {
		o.loginService = svc
	}
	if err := r.observeControllerState(ctx, s); err != nil {
		return err
	}
	return r.observePendingWorkers(ctx, s)
}

func statefulSetReady(s *appsv1.StatefulSet) bool {
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	return s.Status.ObservedGeneration >= s.Generation && s.Status.ReadyReplicas >= want && s.Status.UpdatedReplicas >= want
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobSucceeded reports whether the Job completed.
func jobSucceeded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// statefulSets are the observed StatefulSets: the components', then the node sets' in name order.
func (o *observed) statefulSets() []*appsv1.StatefulSet {
	out := []*appsv1.StatefulSet{o.controller, o.worker, o.login, o.accounting}
	for _, name := range slices.Sorted(maps.Keys(o.nodeSets)) {
		out = append(out, o.nodeSets[name])
	}
	return out
}
