package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// SlurmClusterReconciler turns SlurmCluster objects into running Slurm clusters.
type SlurmClusterReconciler struct {
	client.Client
	// APIReader reads objects the cache does not hold (the user's database password Secret).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// ClusterDomain is the Kubernetes DNS domain (cluster.local when empty).
	ClusterDomain string
	// SlurmClient makes the client that asks slurmctld (through slurmrestd) before workers are
	// removed. Nil: slurmrestd in the controller pod, through the cluster's DNS.
	SlurmClient SlurmClientFunc
	// SlurmPollInterval is how often a cluster whose slurmctld answers is looked at again, to
	// follow jobs starting and ending (busy labels, node counts). Zero means 30 seconds.
	SlurmPollInterval time.Duration
}

// +kubebuilder:rbac:groups=slurm.hpc.dev,resources=slurmclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=slurm.hpc.dev,resources=slurmclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets;deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=k8s.mariadb.com,resources=mariadbs;databases;users;grants,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;update;patch;delete

// Reconcile runs the phases below in order. Each phase is a method in a file of its own.
func (r *SlurmClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("slurmCluster", req.NamespacedName)
	ctx = log.IntoContext(ctx, logger)

	sc := &slurmv1alpha1.SlurmCluster{}
	if err := r.Get(ctx, req.NamespacedName, sc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // children go with it through owner references
	}
	desired := base.WithDefaults(sc)
	facts := &observed{}

	if err := r.findGPUShape(ctx, desired, facts); err != nil {
		return ctrl.Result{}, fmt.Errorf("find gpu shape: %w", err)
	}
	keys, err := r.ensureKeys(ctx, desired)
	var lost *mungeKeyLostError
	if errors.As(err, &lost) {
		// Nothing is rendered with a key the daemons do not share; look again for the restore.
		facts.renderErr, facts.renderReason = lost, "MungeKeyMissing"
		if err := r.updateStatus(ctx, sc, desired, facts); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("ensure keys: %w", err)
	}
	plan, err := r.planWorkers(ctx, desired, keys.JWT, &sc.Status, facts)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("plan workers: %w", err)
	}
	facts.scaling = plan
	toRender := desired
	if plan.replicas != desired.Spec.SlurmNodes.Worker.Size {
		// Keep the leaving workers (in the StatefulSet and in slurm.conf) until they are drained.
		toRender = desired.DeepCopy()
		toRender.Spec.SlurmNodes.Worker.Size = plan.replicas
	}
	in := base.Input{Cluster: toRender, Keys: keys, ClusterDomain: r.ClusterDomain, GPU: facts.gpu.GPU}
	in.Optional = r.optionalAPIs(facts)
	r.accountingDatabase(ctx, &in, facts)

	parts, err := render.All(in)
	if err != nil {
		facts.renderErr = err
		return ctrl.Result{}, r.updateStatus(ctx, sc, desired, facts)
	}
	var keep []slurmv1alpha1.Component
	if held, err := r.holdJailOverwrite(ctx, sc, desired); err != nil {
		return ctrl.Result{}, err
	} else if held != "" {
		parts, facts.jailHeld = withoutComponent(parts, slurmv1alpha1.ComponentJail), held
		keep = append(keep, slurmv1alpha1.ComponentJail)
	}
	if err := r.applyAll(ctx, sc, parts); err != nil {
		return ctrl.Result{}, err
	}
	if facts.databaseErr != "" {
		keep = append(keep, slurmv1alpha1.ComponentAccounting)
	}
	if err := r.prune(ctx, sc, parts, keep...); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.observeChildren(ctx, desired, facts); err != nil {
		return ctrl.Result{}, fmt.Errorf("observe children: %w", err)
	}
	if err := r.rollWorkers(ctx, desired, keys.JWT, &sc.Status, facts); err != nil {
		return ctrl.Result{}, fmt.Errorf("update workers: %w", err)
	}
	if err := r.labelBusyWorkers(ctx, desired, keys.JWT, facts); err != nil {
		return ctrl.Result{}, fmt.Errorf("label busy workers: %w", err)
	}
	if err := r.updateStatus(ctx, sc, desired, facts); err != nil {
		return ctrl.Result{}, err
	}
	if facts.scaling.active || facts.rollout.active {
		// Jobs end and nodes drain without any Kubernetes event: look again soon.
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if facts.slurmReached {
		// Jobs start and end without a Kubernetes event: refresh busy labels and counts.
		poll := r.SlurmPollInterval
		if poll == 0 {
			poll = 30 * time.Second
		}
		return ctrl.Result{RequeueAfter: poll}, nil
	}
	if !facts.settled() {
		// Pods, load balancers and Jobs change without touching our objects' specs; look again.
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches SlurmClusters and every kind of child they own.
func (r *SlurmClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&slurmv1alpha1.SlurmCluster{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&batchv1.Job{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.clustersForNode), builder.WithPredicates(gpuShapeChanged())).
		Named("slurmcluster").
		Complete(r)
}

// getOptional reads an object and reports whether it exists.
func (r *SlurmClusterReconciler) getOptional(ctx context.Context, key client.ObjectKey, obj client.Object) (bool, error) {
	err := r.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
