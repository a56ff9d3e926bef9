package controller

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/gpu"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// computeStatus is pure: these table tests need no API server.

func sts(replicas, ready int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		Spec:   appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.StatefulSetStatus{Replicas: replicas, ReadyReplicas: ready, UpdatedReplicas: replicas},
	}
}

func statusCluster() *slurmv1alpha1.SlurmCluster {
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Name, sc.Generation = "demo", 3
	sc.Spec.SlurmNodes.Worker.Size = 2
	return base.WithDefaults(sc)
}

func TestComputeStatus(t *testing.T) {
	ready := func() *observed {
		return &observed{
			controller: sts(1, 1), worker: sts(2, 2), login: sts(1, 1), scalingDecided: true, rolloutDecided: true,
			gpu:          gpu.Result{GPU: base.GPU{Count: 8, Type: "h100"}, Product: "NVIDIA-H100-80GB-HBM3", Source: "NodeLabels", Consistent: true, Reason: slurmv1alpha1.ReasonFromNodeLabels},
			loginService: &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}}}},
		}
	}
	for _, tc := range []struct {
		name       string
		edit       func(*slurmv1alpha1.SlurmCluster, *observed)
		wantAvail  metav1.ConditionStatus
		wantReason string
		check      func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus)
	}{
		{name: "everything ready is Available", wantAvail: metav1.ConditionTrue, wantReason: "ClusterReady",
			check: func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus) {
				if st.Workers.Summary != "2/2" || st.LoginEndpoint != "203.0.113.7" || st.GPU == nil || st.GPU.PerWorker != 8 || st.GPU.Type != "h100" {
					t.Errorf("status: %+v", st)
				}
				if st.ObservedGeneration != 3 {
					t.Errorf("observedGeneration %d", st.ObservedGeneration)
				}
			}},
		{name: "no slurmctld is not Available", wantAvail: metav1.ConditionFalse, wantReason: "ControllerUnavailable",
			edit: func(_ *slurmv1alpha1.SlurmCluster, o *observed) { o.controller = sts(1, 0) }},
		{name: "a jail still populating is not Available", wantAvail: metav1.ConditionFalse, wantReason: "JailNotPopulated",
			edit: func(sc *slurmv1alpha1.SlurmCluster, o *observed) {
				sc.Spec.PopulateJail = &slurmv1alpha1.PopulateJail{Image: "jail:1"}
				o.populateJob = &batchv1.Job{}
			}},
		{name: "no worker ready is not Available", wantAvail: metav1.ConditionFalse, wantReason: "NoWorkerReady",
			edit: func(_ *slurmv1alpha1.SlurmCluster, o *observed) { o.worker = sts(2, 0) }},
		{name: "a worker not ready on a lost Kubernetes node is named with the node, the cluster still Available", wantAvail: metav1.ConditionTrue, wantReason: "ClusterReady",
			edit: func(_ *slurmv1alpha1.SlurmCluster, o *observed) {
				o.worker = sts(2, 1)
				o.unhealthyNodeWorkers = []string{"pod demo-worker-1: Kubernetes node gpu-7 is not ready"}
			},
			check: func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus) {
				c := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionWorkersAvailable)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != slurmv1alpha1.ReasonWorkerNodeUnhealthy ||
					c.Message != "1/2 worker pods ready; pod demo-worker-1: Kubernetes node gpu-7 is not ready" {
					t.Errorf("WorkersAvailable: %+v", c)
				}
			}},
		{name: "a node set's pod Kubernetes refused, the default set ready: WorkersAvailable says which and why, the cluster still Available", wantAvail: metav1.ConditionTrue, wantReason: "ClusterReady",
			edit: func(sc *slurmv1alpha1.SlurmCluster, o *observed) {
				sc.Spec.SlurmNodes.NodeSets = []slurmv1alpha1.NodeSet{{Name: "burst", Size: 2}}
				o.refusedWorkers = map[string]string{"burst-1": `FailedCreate: pods "demo-burst-1" is forbidden: exceeded quota: q, requested: pods=1, used: pods=9, limited: pods=9`}
			},
			check: func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus) {
				c := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionWorkersAvailable)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != slurmv1alpha1.ReasonWorkerPodsRefused ||
					c.Message != `2/2 worker pods ready; pod demo-burst-1 (Slurm node burst-1) cannot be created: pods "demo-burst-1" is forbidden: exceeded quota: q, requested: pods=1, used: pods=9, limited: pods=9` {
					t.Errorf("WorkersAvailable: %+v", c)
				}
			}},
		{name: "a pod pending and one refused: both named, pending first", wantAvail: metav1.ConditionTrue, wantReason: "ClusterReady",
			edit: func(_ *slurmv1alpha1.SlurmCluster, o *observed) {
				o.worker = sts(2, 1)
				o.pendingWorkers = []string{"pod demo-worker-0 (Slurm node worker-0) cannot start: Unschedulable: 0/1 nodes are available"}
				o.refusedWorkers = map[string]string{"worker-1": "FailedCreate: denied"}
			},
			check: func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus) {
				c := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionWorkersAvailable)
				if c == nil || c.Reason != slurmv1alpha1.ReasonWorkerPodsPending ||
					c.Message != "1/2 worker pods ready; pod demo-worker-0 (Slurm node worker-0) cannot start: Unschedulable: 0/1 nodes are available; pod demo-worker-1 (Slurm node worker-1) cannot be created: denied" {
					t.Errorf("WorkersAvailable: %+v", c)
				}
			}},
		{name: "a render error is this generation's status: Degraded says it", wantAvail: metav1.ConditionFalse, wantReason: "RenderFailed",
			edit: func(_ *slurmv1alpha1.SlurmCluster, o *observed) {
				o.renderErr = errString("volume source x is missing")
			},
			check: func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus) {
				if st.ObservedGeneration != 3 {
					t.Errorf("observedGeneration %d, want 3", st.ObservedGeneration)
				}
				if c := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionDegraded); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "RenderFailed" {
					t.Errorf("Degraded not set: %+v", c)
				}
			}},
		{name: "a refused child is named, and the rest of the status is still written", wantAvail: metav1.ConditionTrue, wantReason: "ClusterReady",
			edit: func(_ *slurmv1alpha1.SlurmCluster, o *observed) {
				o.applyErrs = []string{"ConfigMap demo-root-authorized-keys: ConfigMap \"demo-root-authorized-keys\" is invalid: []: Too long: must have at most 1048576 bytes"}
			},
			check: func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus) {
				c := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionDegraded)
				if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "ApplyFailed" || !strings.Contains(c.Message, "ConfigMap demo-root-authorized-keys: ") {
					t.Errorf("Degraded: %+v", c)
				}
				if st.ObservedGeneration != 3 || st.Workers.Summary != "2/2" {
					t.Errorf("status: %+v", st)
				}
			}},
		{name: "children that could not be read keep their conditions", wantAvail: metav1.ConditionTrue, wantReason: "ClusterReady",
			edit: func(_ *slurmv1alpha1.SlurmCluster, o *observed) {
				*o = observed{childrenUnknown: true, phaseErr: errString("find the GPU shape: the server is currently unable to handle the request")}
			},
			check: func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus) {
				c := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionDegraded)
				if c == nil || c.Reason != "ReconcileFailed" || !strings.Contains(c.Message, "find the GPU shape: ") {
					t.Errorf("Degraded: %+v", c)
				}
				if !meta.IsStatusConditionTrue(st.Conditions, slurmv1alpha1.ConditionWorkersAvailable) || st.Workers.Ready != 2 || st.GPU == nil || st.GPU.PerWorker != 8 {
					t.Errorf("what was known before was lost: %+v", st)
				}
			}},
		{name: "Slurm's node states give the counts", wantAvail: metav1.ConditionTrue, wantReason: "ClusterReady",
			edit: func(_ *slurmv1alpha1.SlurmCluster, o *observed) {
				o.slurmReached = true
				o.slurmNodes = []slurm.Node{{Name: "worker-0", State: []string{"IDLE"}}, {Name: "worker-1", State: []string{"MIXED", "DRAIN"}, AllocCPUs: 1}}
			},
			check: func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus) {
				if st.Workers.Idle != 1 || st.Workers.Drained != 1 || st.Workers.Allocated != 0 {
					t.Errorf("counts: %+v", st.Workers)
				}
			}},
		{name: "a waiting scale-down shows in ScalingDown", wantAvail: metav1.ConditionTrue, wantReason: "ClusterReady",
			edit: func(_ *slurmv1alpha1.SlurmCluster, o *observed) {
				o.scaling = scaling{active: true, reason: "WaitingForJobs", message: "waiting for worker-1"}
			},
			check: func(t *testing.T, st slurmv1alpha1.SlurmClusterStatus) {
				if c := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionScalingDown); c == nil || c.Reason != "WaitingForJobs" || c.Status != metav1.ConditionTrue {
					t.Errorf("ScalingDown: %+v", c)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, o := statusCluster(), ready()
			if tc.edit != nil {
				tc.edit(sc, o)
			}
			// Each case follows a reconcile that found everything ready.
			prev := computeStatus(statusCluster(), slurmv1alpha1.SlurmClusterStatus{}, ready())
			st := computeStatus(sc, prev, o)
			c := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionAvailable)
			if c == nil || c.Status != tc.wantAvail || c.Reason != tc.wantReason {
				t.Fatalf("Available = %+v, want %s/%s", c, tc.wantAvail, tc.wantReason)
			}
			for _, cond := range st.Conditions {
				if cond.Reason == "" {
					t.Errorf("condition %s has no reason", cond.Type)
				}
			}
			if tc.check != nil {
				tc.check(t, st)
			}
		})
	}
}

func TestAnUnchangedObservationGivesAnEqualStatus(t *testing.T) {
	sc := statusCluster()
	o := &observed{controller: sts(1, 1), worker: sts(2, 2), login: sts(1, 1), gpu: gpu.Result{Consistent: true, Reason: slurmv1alpha1.ReasonFromSpec}}
	first := computeStatus(sc, slurmv1alpha1.SlurmClusterStatus{}, o)
	second := computeStatus(sc, first, o)
	for i := range first.Conditions {
		if first.Conditions[i].LastTransitionTime != second.Conditions[i].LastTransitionTime {
			t.Fatalf("condition %s moved its transition time without a change", first.Conditions[i].Type)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// A reconcile that stopped before planning workers or updating them leaves ScalingDown and
// WorkersUpdating as they were: turning them False would restart the grace period and keep a
// cancelled scale-down's drains on.
func TestAStoppedReconcileKeepsScalingAndUpdating(t *testing.T) {
	sc := statusCluster()
	waiting := &observed{controller: sts(1, 1), worker: sts(2, 2), login: sts(1, 1), scalingDecided: true, rolloutDecided: true,
		scaling: scaling{active: true, reason: "WaitingForJobs", message: "waiting for worker-1"},
		rollout: rollout{active: true, reason: "ReplacingPods", message: "1 of 2"}}
	prev := computeStatus(sc, slurmv1alpha1.SlurmClusterStatus{}, waiting)
	stopped := &observed{childrenUnknown: true, phaseErr: errString("ensure keys: the server is currently unable to handle the request")}
	st := computeStatus(sc, prev, stopped)
	for _, c := range []string{slurmv1alpha1.ConditionScalingDown, slurmv1alpha1.ConditionWorkersUpdating} {
		if !meta.IsStatusConditionTrue(st.Conditions, c) {
			t.Errorf("%s lost its True: %+v", c, meta.FindStatusCondition(st.Conditions, c))
		}
		if old, now := meta.FindStatusCondition(prev.Conditions, c), meta.FindStatusCondition(st.Conditions, c); !old.LastTransitionTime.Equal(&now.LastTransitionTime) {
			t.Errorf("%s moved its last transition", c)
		}
	}
}

// A spec value the render did not use makes the cluster Degraded, naming it, while the cluster
// stays Available.
func TestASpecValueNotUsedIsDegradedButAvailable(t *testing.T) {
	sc := statusCluster()
	o := &observed{controller: sts(1, 1), worker: sts(2, 2), login: sts(1, 1), gpu: gpu.Result{Consistent: true, Reason: slurmv1alpha1.ReasonFromSpec},
		renderWarnings: []string{"spec.slurmConfig.defCpuPerGPU is not used: …; 12 is used"}}
	st := computeStatus(sc, slurmv1alpha1.SlurmClusterStatus{}, o)
	d := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionDegraded)
	if d == nil || d.Status != metav1.ConditionTrue || d.Reason != slurmv1alpha1.ReasonSpecValueNotUsed || !strings.Contains(d.Message, "spec.slurmConfig.defCpuPerGPU") {
		t.Fatalf("Degraded: %+v", d)
	}
	if a := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionAvailable); a.Reason == slurmv1alpha1.ReasonRenderFailed {
		t.Fatalf("Available says the render failed: %+v", a)
	}
}
