package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/policy"
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
	// Policy restricts the images and hostPaths a SlurmCluster may ask for (the installer's
	// choice, from the manager's flags). A spec it refuses is not rendered: what runs stays.
	Policy policy.Policy
	// SlurmPollInterval is how often a cluster whose slurmctld answers is looked at again, to
	// follow jobs starting and ending (busy labels, node counts). It bounds how long a worker
	// that just started a job stays evictable. Zero means DefaultSlurmPollInterval.
	SlurmPollInterval time.Duration
	// OutOfServiceTaintAfter, when positive, is how long a Kubernetes node that holds a stranded
	// worker pod must have been not ready before the operator taints it out of service
	// (node.kubernetes.io/out-of-service), so Kubernetes deletes its pods and detaches their
	// volumes. Zero leaves that to the admin. It needs permission to patch nodes.
	OutOfServiceTaintAfter time.Duration
	// ControlPlanePriorityClass, when set, is the PriorityClass of every cluster's
	// control-plane pods; it must exist (the operator chart makes it).
	ControlPlanePriorityClass string
	// Operator names the operator's own pods, which the clusters' NetworkPolicies let reach
	// slurmrestd; empty when the manager runs outside the cluster.
	Operator base.OperatorPods
	// ExporterTokenLifetime is how long the exporter's token is valid; it is renewed when half
	// is left. Zero means DefaultExporterTokenLifetime.
	ExporterTokenLifetime time.Duration

	// OptionalAPIInterval is how often discovery is asked whether mariadb-operator or the
	// Prometheus operator was installed or removed. Zero means DefaultOptionalAPIInterval.
	OptionalAPIInterval time.Duration
	// MaxConcurrentReconciles is how many SlurmClusters are reconciled at once. Zero means
	// DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int

	// StatusSettle is how long a status write waits for a StatefulSet the operator just changed
	// to report on it (DefaultStatusSettle in the manager); zero writes at once.
	StatusSettle time.Duration

	// created maps a child (createdKey) to when the operator created it (createdAt).
	created      sync.Map
	createdSwept atomic.Value
	// statusWritten maps a SlurmCluster's namespaced name to the status last written
	// (writtenStatus); forgotten when the SlurmCluster is gone.
	statusWritten sync.Map
	// topologyLabels maps a SlurmCluster's namespaced name to the node label keys its
	// spec.slurmConfig.topology names ([]string), for the node predicate.
	topologyLabels sync.Map
	// activeChecks maps a SlurmCluster's namespaced name to its active checks' memory
	// (*activecheck.State): when each check last ran on each worker, the jobs read.
	activeChecks sync.Map
	// apis answers which optional APIs are served (set up by SetupWithManager).
	apis *optionalAPIWatcher
	// podsIndexed: the manager's cache indexes pods by cluster (SetupWithManager).
	podsIndexed bool
	// shapes memoises each worker set's GPU shape between node changes; nil (no node watch,
	// as in a reconciler not set up with a manager) computes it on every reconcile.
	shapes *shapeMemo
	// resumes maps a SlurmCluster's namespaced name and an elastic set's name
	// ("ns/name/set") to the set's power-ups being followed (*autoscale.Resumes).
	resumes sync.Map
	// applied maps a child's UID to the resourceVersion the operator's last apply left it at.
	applied sync.Map
}

// +kubebuilder:rbac:groups=slurm.hpc.dev,resources=slurmclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=slurm.hpc.dev,resources=slurmclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=slurm.hpc.dev,resources=slurmclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=apps,resources=statefulsets;deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups=k8s.mariadb.com,resources=mariadbs;databases;users;grants,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;list;watch;create;update;patch;delete

// Reconcile runs the phases (phases.go) and writes the status whatever they did: every path,
// a spec that cannot be rendered, a child the API refused or an API error, ends with a status
// that says so.
func (r *SlurmClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx).WithValues("slurmCluster", req.NamespacedName)
	ctx = log.IntoContext(ctx, logger)

	sc := &slurmv1alpha1.SlurmCluster{}
	if err := r.Get(ctx, req.NamespacedName, sc); err != nil {
		if apierrors.IsNotFound(err) {
			r.statusWritten.Delete(req.NamespacedName)
			r.topologyLabels.Delete(req.NamespacedName)
			r.activeChecks.Delete(req.NamespacedName)
			r.forgetResumes(req.Namespace, req.Name)
			if r.shapes != nil {
				r.shapes.forget(req.Namespace, req.Name)
			}
			forgetCluster(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // children go with it through owner references
	}
	r.ownStatus(sc)
	r.forgetOldCreates(time.Now())
	s := &reconcileScope{cluster: sc, desired: base.WithDefaults(sc), facts: &observed{}}
	err := r.runPhases(ctx, s)
	if wait := r.statusSettling(s.facts, time.Now()); err == nil && wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if serr := r.updateStatus(ctx, sc, s.desired, s.facts); serr != nil {
		err = errors.Join(err, fmt.Errorf("update status: %w", serr))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return lookAgainBy(s.result(r.SlurmPollInterval), s.renewIn), nil
}

// SetupWithManager watches SlurmClusters, every kind of child they own, the GPU nodes and the
// optional APIs.
func (r *SlurmClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	d, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podClusterIndex, podCluster); err != nil {
		return fmt.Errorf("index pods by cluster: %w", err)
	}
	r.podsIndexed = true
	r.shapes = newShapeMemo()
	r.apis = newOptionalAPIWatcher(d, r.OptionalAPIInterval)
	if err := mgr.Add(r.apis); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&slurmv1alpha1.SlurmCluster{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.concurrency()}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&batchv1.Job{}).
		Owns(&batchv1.CronJob{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&discoveryv1.EndpointSlice{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(clusterOfPod), builder.WithPredicates(podAddressChanged())).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allClusters), builder.WithPredicates(nodeChangeMatters(r.isTopologyLabel, r.shapes.nodesChanged))).
		WatchesRawSource(source.Channel(r.apis.changed, handler.EnqueueRequestsFromMapFunc(r.allClusters))).
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

// DefaultMaxConcurrentReconciles: reconciles of different SlurmClusters run side by side. A
// reconcile mostly waits on the API server (and, at a cluster's creation, generates its keys),
// so a few run at once even on a small node; one cluster is never reconciled twice at once.
const DefaultMaxConcurrentReconciles = 4

func (r *SlurmClusterReconciler) concurrency() int {
	if r.MaxConcurrentReconciles > 0 {
		return r.MaxConcurrentReconciles
	}
	return DefaultMaxConcurrentReconciles
}
