package controller_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

// The suite runs the reconciler in a real manager against a real kube-apiserver and etcd.
// There is no kube-controller-manager, so StatefulSets create no pods: the tests check the
// objects the operator writes, and set child status by hand where a test needs it.

var (
	testEnv   *envtest.Environment
	k8sClient client.Client
	cfg       *rest.Config
	// operatorCfg is a user with the operator's ClusterRole.
	operatorCfg *rest.Config
	stopMgr     context.CancelFunc
	mgrDone     chan struct{}
)

func TestControllerOnARealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real API server; run without -short")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "SlurmCluster controller on a real API server")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	testEnv, k8sClient, _, err = kube.StartEnv([]string{filepath.Join("..", "..", "config", "crd", "bases")})
	Expect(err).NotTo(HaveOccurred())
	cfg = testEnv.Config
	// The manager runs with the operator's own ClusterRole, not as an admin: a permission the
	// role lacks fails these specs as it would fail an installation.
	operatorCfg, err = kube.OperatorConfig(testEnv, k8sClient, filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	startManager()
})

var _ = AfterSuite(func() {
	stopManager()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// operatorPods are the operator's own pods as the chart names them; every reconciler of the suite
// takes them, or its NetworkPolicy for slurmctld would differ from the running manager's.
var operatorPods = base.OperatorPods{Namespace: "slurm-system", PodLabels: map[string]string{"app.kubernetes.io/name": "slurm-operator"}}

// startManager runs the operator's manager, as cmd/manager does.
func startManager() {
	mgr, err := ctrl.NewManager(operatorCfg, ctrl.Options{
		Scheme:                 kube.Scheme(),
		Cache:                  controller.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The suite restarts the manager in-process; the name check is for metrics only.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&controller.SlurmClusterReconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Scheme:      mgr.GetScheme(),
		Recorder:    mgr.GetEventRecorder("slurm-operator"),
		SlurmClient: slurmClientFor,
		// Follow jobs quickly: the specs against real Slurm wait for busy labels.
		SlurmPollInterval: 2 * time.Second,
		// The opt-in out-of-service taint, for nodes lost a minute ago (the stranded spec).
		OutOfServiceTaintAfter: time.Minute,
		// Notice an optional API installed by a spec quickly.
		OptionalAPIInterval: time.Second,
		Operator:            operatorPods,
	}).SetupWithManager(mgr)).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	stopMgr = cancel
	mgrDone = make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
}

// slurmClients routes a cluster (by namespace) to a real slurmrestd started by a test; other
// clusters get a real client for a loopback port nothing listens on: Slurm is unreachable, at
// once, without asking the machine's DNS for cluster names it cannot know.
var slurmClients sync.Map

func slurmClientFor(sc *slurmv1alpha1.SlurmCluster, key []byte) controller.SlurmAPI {
	if c, ok := slurmClients.Load(sc.Namespace); ok {
		return c.(controller.SlurmAPI)
	}
	return slurm.NewClient("http://127.0.0.1:1", key)
}

func stopManager() {
	if stopMgr != nil {
		stopMgr()
		<-mgrDone
		stopMgr = nil
	}
}

// countingClient wraps a client and counts the calls that write to the API server.
func countingClient(c client.WithWatch, writes *atomic.Int64) client.WithWatch {
	count := func() { writes.Add(1) }
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count()
			return cl.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count()
			return cl.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			count()
			return cl.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			count()
			return cl.Apply(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count()
			return cl.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			count()
			return cl.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			count()
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}

func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "slurm-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

const timeout = 20 * time.Second

// eventuallyCondition waits until the SlurmCluster's condition has the reason, and a message
// containing msg.
func eventuallyCondition(ctx SpecContext, ns, name, condition, reason, msg string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		sc := &slurmv1alpha1.SlurmCluster{}
		g.Expect(k8sClient.Get(ctx, key(ns, name), sc)).To(Succeed())
		c := meta.FindStatusCondition(sc.Status.Conditions, condition)
		g.Expect(c).NotTo(BeNil(), condition)
		g.Expect(c.Reason).To(Equal(reason), condition)
		g.Expect(c.Message).To(ContainSubstring(msg), condition)
	}).WithTimeout(timeout).Should(Succeed())
}
