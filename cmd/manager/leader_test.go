package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

// Two managers built as main builds them, with leader election on one real API server and
// only the rights the operator chart gives its service account: one leads, the other waits,
// and when the leader is stopped (an upgrade, a drained node) it hands the Lease over at once.
func TestOneOfTwoManagersLeadsAndTheOtherTakesOverWhenItStops(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real API server and helm")
	}
	env, admin, kubeconfig, err := kube.StartEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "slurm-system"
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	applyChartRBAC(t, ctx, kubeconfig, ns)
	user, err := env.AddUser(envtest.User{Name: "system:serviceaccount:" + ns + ":slurm-operator", Groups: []string{"system:serviceaccounts", "system:authenticated"}}, nil)
	must(t, err)

	// The lease is kept short here only, so that the test need not wait the default 15 s; a
	// takeover well within it shows the leader released the Lease rather than let it expire.
	const leaseDuration = 10 * time.Second
	type running struct {
		mgr  manager.Manager
		stop context.CancelFunc
		done chan error
	}
	start := func() running {
		t.Helper()
		o := managerConfig{scheme: kube.Scheme(), metricsAddr: "0", probeAddr: "0", leaderElect: true, leaderElectionNamespace: ns}.options()
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr.To(leaseDuration), ptr.To(8*time.Second), ptr.To(250*time.Millisecond)
		mgr, err := ctrl.NewManager(user.Config(), o)
		must(t, err)
		mctx, stop := context.WithCancel(ctx)
		// done yields Start's error once, then nil: a deferred stop may wait on it again.
		r := running{mgr, stop, make(chan error, 1)}
		go func() { r.done <- mgr.Start(mctx); close(r.done) }()
		return r
	}
	holder := func() string {
		lease := &coordinationv1.Lease{}
		must(t, admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: leaderElectionID}, lease))
		return ptr.Deref(lease.Spec.HolderIdentity, "")
	}

	first := start()
	defer func() { first.stop(); <-first.done }()
	select {
	case <-first.mgr.Elected():
	case err := <-first.done:
		t.Fatalf("the first manager stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the first manager was not elected")
	}
	leader := holder()
	if leader == "" {
		t.Fatal("the first manager leads but the Lease has no holder")
	}

	second := start()
	defer func() { second.stop(); <-second.done }()
	select {
	case <-second.mgr.Elected():
		t.Fatal("the second manager was elected while the first leads")
	case err := <-second.done:
		t.Fatalf("the second manager stopped: %v", err)
	case <-time.After(3 * time.Second):
	}
	if h := holder(); h != leader {
		t.Fatalf("the Lease moved from %q to %q while its holder ran", leader, h)
	}

	t.Run("the chart's leader-election Role lets the leader record its election as an event", func(t *testing.T) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			events := &corev1.EventList{}
			must(t, admin.List(ctx, events, client.InNamespace(ns)))
			for _, e := range events.Items {
				if e.Reason == "LeaderElection" && e.InvolvedObject.Kind == "Lease" && strings.Contains(e.Message, "became leader") {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no LeaderElection event in %s: %+v", ns, events.Items)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	stopped := time.Now()
	first.stop()
	if err := <-first.done; err != nil {
		t.Fatalf("the first manager did not stop cleanly: %v", err)
	}
	select {
	case <-second.mgr.Elected():
		took := time.Since(stopped)
		if took >= leaseDuration/2 {
			t.Fatalf("the second manager took over after %s: the first did not release the Lease", took)
		}
		t.Logf("the second manager took over %s after the first stopped", took.Round(time.Millisecond))
	case err := <-second.done:
		t.Fatalf("the second manager stopped: %v", err)
	case <-time.After(2 * leaseDuration):
		t.Fatal("the second manager did not take over")
	}
	if h := holder(); h == "" || h == leader {
		t.Fatalf("the Lease's holder after the takeover: %q (the first was %q)", h, leader)
	}
}

// applyChartRBAC installs what the operator chart's rbac.yaml renders with its defaults (the
// service account, its roles and the leader-election Role), with the helm and kubectl built
// beside the API server.
func applyChartRBAC(t *testing.T, ctx context.Context, kubeconfig, ns string) {
	t.Helper()
	helm := exec.CommandContext(ctx, filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "helm"), "template", "slurm-operator",
		filepath.Join(fixtures.RepoRoot(), "charts", "slurm-operator"), "-n", ns, "--show-only", "templates/rbac.yaml")
	helm.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	rbac, err := helm.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, rbac)
	}
	kubectl, err := kube.Kubectl()
	must(t, err)
	apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", "-")
	apply.Stdin = strings.NewReader(string(rbac))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}
