package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

// TestNamespacedInstall installs the operator chart's RBAC with watchNamespaces, on a real API
// server, and runs the manager as the chart's service account with the namespaces the chart
// passes: a cluster in a watched namespace is reconciled with the Roles alone (a missing right
// would show in Degraded), and one elsewhere is left alone. The chart's PriorityClass is not
// installed at first: the control plane runs without it, Degraded says so, and it is taken up
// once it exists.
func TestNamespacedInstall(t *testing.T) {
	assets := realComponents(t, "needs helm and a real API server")
	root := fixtures.RepoRoot()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, c, kubeconfig, kubectl := apiServer(ctx, t, []string{filepath.Join(root, "config", "crd", "bases")}, "slurm-system", "slurm-a", "slurm-b")

	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("watchNamespaces: [slurm-a]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(assets, "helm"), "template", "slurm-operator", filepath.Join(root, "charts", "slurm-operator"),
		"-n", "slurm-system", "-f", values, "--show-only", "templates/rbac.yaml")
	cmd.Env = helmEnv(t)
	rbac, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, rbac)
	}
	if strings.Contains(string(rbac), "kind: ClusterRoleBinding\nmetadata:\n  name: slurm-operator\n") {
		t.Fatal("a namespaced install still binds the cluster-wide role")
	}
	apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", "-")
	apply.Stdin = strings.NewReader(string(rbac))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}

	// The manager as the chart's service account, with what the chart passes it.
	user, err := env.AddUser(envtest.User{Name: "system:serviceaccount:slurm-system:slurm-operator", Groups: []string{"system:serviceaccounts", "system:authenticated"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(user.Config(), ctrl.Options{Scheme: kube.Scheme(), Cache: controller.CacheOptions("slurm-a"),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&controller.SlurmClusterReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("slurm-operator"), ControlPlanePriorityClass: "slurm-control-plane"}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { stop(); <-done }()

	for _, ns := range []string{"slurm-a", "slurm-b"} {
		sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
		if err != nil {
			t.Fatal(err)
		}
		sc.Namespace = ns
		if err := c.Create(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	name := func(ns string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: "fpt-hpc"} }
	// reconciled waits until the cluster in slurm-a is reconciled with Degraded's reason want,
	// and returns its controller StatefulSet's PriorityClass.
	reconciled := func(want string) string {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			sc := &slurmv1alpha1.SlurmCluster{}
			err := c.Get(ctx, name("slurm-a"), sc)
			d := meta.FindStatusCondition(sc.Status.Conditions, "Degraded")
			w := &appsv1.StatefulSet{}
			werr := c.Get(ctx, types.NamespacedName{Namespace: "slurm-a", Name: "fpt-hpc-worker"}, w)
			ctl := &appsv1.StatefulSet{}
			cerr := c.Get(ctx, types.NamespacedName{Namespace: "slurm-a", Name: "fpt-hpc-controller"}, ctl)
			if err == nil && d != nil && werr == nil && cerr == nil && sc.Status.ObservedGeneration == sc.Generation && d.Reason == want {
				return ctl.Spec.Template.Spec.PriorityClassName
			}
			if time.Now().After(deadline) {
				var got string
				if d != nil {
					got = d.Reason + ": " + d.Message
				}
				t.Fatalf("the cluster in the watched namespace: not reconciled with Degraded %s: %v %v %v; Degraded %s", want, err, werr, cerr, got)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	// Without the class, and with the right to read it (a refused read would say so instead).
	if class := reconciled("PriorityClassMissing"); class != "" {
		t.Fatalf("slurmctld asks for the PriorityClass %q, which does not exist: Kubernetes would refuse its pods", class)
	}
	sc := &slurmv1alpha1.SlurmCluster{}
	if err := c.Get(ctx, name("slurm-a"), sc); err != nil {
		t.Fatal(err)
	}
	if d := meta.FindStatusCondition(sc.Status.Conditions, "Degraded"); !strings.Contains(d.Message, "the PriorityClass slurm-control-plane (the manager's --control-plane-priority-class, the operator chart's priorityClass.name) does not exist") {
		t.Fatalf("Degraded does not name the missing class: %s", d.Message)
	}
	if err := c.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "slurm-control-plane"}, Value: 1000000}); err != nil {
		t.Fatal(err)
	}
	// The sample's exporter has no ServiceMonitor API here; nothing else may be wrong.
	if class := reconciled("OptionalAPIMissing"); class != "slurm-control-plane" {
		t.Fatalf("slurmctld's PriorityClass once it exists: %q", class)
	}
	time.Sleep(2 * time.Second)
	other := &slurmv1alpha1.SlurmCluster{}
	if err := c.Get(ctx, name("slurm-b"), other); err != nil {
		t.Fatal(err)
	}
	if len(other.Status.Conditions) > 0 {
		t.Fatalf("a cluster outside the watched namespaces was reconciled: %+v", other.Status.Conditions)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm-b", Name: "fpt-hpc-worker"}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a worker StatefulSet outside the watched namespaces: %v", err)
	}
}
