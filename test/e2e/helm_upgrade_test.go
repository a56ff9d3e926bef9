package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/config/crd"
	"github.com/slurm-k8s/slurm-operator/internal/crdupgrade"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/syncbuf"
)

// previousChart is the commit whose operator chart (0.1.0) stands for the release before this
// one: its CRD has no spec.slurmNodes.accounting.enforce and no revision annotation.
const previousChart = "110ad5b4107fbc5e4cce85b992d1d0e9b16d6bd3"

// TestHelmUpgradeUpgradesTheCRD installs the previous operator chart from the repository's
// history with the real helm, creates a cluster, and upgrades to this chart: Helm leaves the old
// CRD (it never upgrades crds/), and the manager, run with the upgraded Deployment's own
// arguments as the chart's service account, updates it, so that a field only the new CRD has is
// kept and acted on. An older manager's CRD never replaces a newer one, and helm uninstall
// leaves the CRD and the cluster.
func TestHelmUpgradeUpgradesTheCRD(t *testing.T) {
	assets := realComponents(t, "needs helm and a real API server")
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	old := t.TempDir()
	archive := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("git -C %q archive %s charts/slurm-operator config/samples/slurm_v1alpha1_slurmcluster.yaml | tar -x -C %q", root, previousChart, old))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("the previous chart from the repository's history (commit %s; a shallow clone lacks it): %v\n%s", previousChart, err, out)
	}
	want, err := crdupgrade.Parse(crd.SlurmClusters)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := crdupgrade.Revision(want)
	if err != nil || shipped < 1 {
		t.Fatalf("this release's CRD has revision %d (%v): make manifests numbers it", shipped, err)
	}

	env, c, kubeconfig, kubectl := apiServer(ctx, t, nil, "slurm-system", "fpt-hpc")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(helmEnv(t), "KUBECONFIG="+kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	helm := func(args ...string) string { t.Helper(); return run(filepath.Join(assets, "helm"), args...) }
	servedCRD := func() (*apiextensionsv1.CustomResourceDefinition, int) {
		t.Helper()
		served := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: want.Name}, served); err != nil {
			t.Fatal(err)
		}
		rev, err := crdupgrade.Revision(served)
		if err != nil {
			t.Fatal(err)
		}
		return served, rev
	}
	hasEnforce := func(crd *apiextensionsv1.CustomResourceDefinition) bool {
		_, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["slurmNodes"].Properties["accounting"].Properties["enforce"]
		return ok
	}
	enforce := func() []slurmv1alpha1.AccountingEnforce {
		t.Helper()
		run(kubectl, "patch", "slurmcluster", "fpt-hpc", "-n", "fpt-hpc", "--type=merge", "-p", `{"spec":{"slurmNodes":{"accounting":{"enforce":["associations","qos"]}}}}`)
		sc := &slurmv1alpha1.SlurmCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "fpt-hpc", Name: "fpt-hpc"}, sc); err != nil {
			t.Fatal(err)
		}
		return sc.Spec.SlurmNodes.Accounting.Enforce
	}

	// The previous release, as a site installed it, and a cluster from its sample.
	helm("install", "slurm-operator", filepath.Join(old, "charts", "slurm-operator"), "-n", "slurm-system")
	if served, rev := servedCRD(); rev != 0 || hasEnforce(served) {
		t.Fatalf("the previous chart's CRD: revision %d, enforce in its schema %t; want an unnumbered CRD without it", rev, hasEnforce(served))
	}
	waitServed(ctx, t, c)
	run(kubectl, "apply", "--server-side", "-n", "fpt-hpc", "-f", filepath.Join(old, "config", "samples", "slurm_v1alpha1_slurmcluster.yaml"))
	// What the old CRD does to a new field: drops it without an error.
	if got := enforce(); len(got) != 0 {
		t.Fatalf("the previous CRD kept accounting.enforce (%v): this test no longer shows the upgrade", got)
	}

	// As docs/install.md says: the site's values kept, this chart's defaults for the values
	// the previous release did not have (--reuse-values alone leaves them out).
	helm("upgrade", "slurm-operator", filepath.Join(root, "charts", "slurm-operator"), "-n", "slurm-system", "--reset-then-reuse-values")
	if _, rev := servedCRD(); rev != 0 {
		t.Fatalf("helm upgrade changed the CRD (revision %d): Helm does not, and this test no longer shows why the manager must", rev)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "slurm-system", Name: "slurm-operator"}, d); err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	if !strings.Contains(strings.Join(args, " "), "--upgrade-crd=true") {
		t.Fatalf("the upgraded Deployment's arguments lack --upgrade-crd=true: %v", args)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: "slurm-operator-crd"}, &rbacv1.ClusterRole{}); err != nil {
		t.Fatalf("the chart's CRD role: %v", err)
	}

	// The upgraded manager, as the chart's service account with the Deployment's arguments
	// (metrics, probes and the Lease aside: it runs outside a pod here).
	sa, err := env.AddUser(envtest.User{Name: "system:serviceaccount:slurm-system:slurm-operator", Groups: []string{"system:serviceaccounts", "system:authenticated"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	saConfig, err := sa.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	saKubeconfig := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := os.WriteFile(saKubeconfig, saConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	manager := exec.CommandContext(mctx, managerBinary(t), append(args, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect=false")...)
	manager.Env = append(os.Environ(), "KUBECONFIG="+saKubeconfig)
	var log syncbuf.Buffer
	manager.Stdout, manager.Stderr = &log, &log
	if err := manager.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop()
		_ = manager.Wait()
		if t.Failed() {
			t.Logf("manager log:\n%s", log.String())
		}
	}()

	waitFor(ctx, t, "the CRD at revision "+fmt.Sprint(shipped), func() (bool, string) {
		served, rev := servedCRD()
		return rev == shipped && hasEnforce(served), fmt.Sprintf("revision %d", rev)
	})
	// The manager logs the update once the API server answered it: a moment after the served
	// CRD shows it.
	waitFor(ctx, t, "the manager saying it updated the CRD", func() (bool, string) {
		return strings.Contains(log.String(), fmt.Sprintf("updated from revision 0 to %d", shipped)), log.String()
	})
	// The cluster the previous release made is reconciled; its worker StatefulSet's template
	// is what the new field must leave alone.
	workers := &appsv1.StatefulSet{}
	waitFor(ctx, t, "the worker StatefulSet", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: "fpt-hpc", Name: "fpt-hpc-worker"}, workers)
		return err == nil, fmt.Sprint(err)
	})
	if got := enforce(); len(got) != 2 {
		t.Fatalf("accounting.enforce after the upgrade: %v, want it kept", got)
	}
	waitFor(ctx, t, "AccountingStorageEnforce in slurm.conf", func() (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "fpt-hpc", Name: "fpt-hpc-slurm-config"}, cm); err != nil {
			return false, err.Error()
		}
		return strings.Contains(cm.Data["slurm-base.conf"], "AccountingStorageEnforce=associations,qos\n"), cm.Data["slurm-base.conf"]
	})
	after := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(workers), after); err != nil {
		t.Fatal(err)
	}
	if after.Generation != workers.Generation {
		t.Errorf("turning on enforcement changed the workers' StatefulSet (generation %d, then %d): its pods would be replaced", workers.Generation, after.Generation)
	}

	// A manager of an older revision (a rollback) leaves the newer CRD as it is.
	older := want.DeepCopy()
	older.Annotations[crdupgrade.RevisionAnnotation] = fmt.Sprint(shipped - 1)
	delete(older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["slurmNodes"].Properties["accounting"].Properties, "enforce")
	adminCRDs := crdClient(t, env)
	o, err := crdupgrade.Ensure(ctx, adminCRDs, older)
	if err != nil || o.Updated {
		t.Fatalf("an older revision's Ensure: %v, %v", o, err)
	}
	if served, rev := servedCRD(); rev != shipped || !hasEnforce(served) {
		t.Fatalf("after an older manager: revision %d, enforce in the schema %t", rev, hasEnforce(served))
	}

	// helm uninstall deletes the operator, never the CRD and with it every cluster.
	stop()
	helm("uninstall", "slurm-operator", "-n", "slurm-system")
	if served, rev := servedCRD(); rev != shipped || served.DeletionTimestamp != nil {
		t.Fatalf("after helm uninstall the CRD is at revision %d, deleting since %v", rev, served.DeletionTimestamp)
	}
	sc := &slurmv1alpha1.SlurmCluster{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "fpt-hpc", Name: "fpt-hpc"}, sc); err != nil || len(sc.Spec.SlurmNodes.Accounting.Enforce) != 2 {
		t.Fatalf("the cluster after helm uninstall: %v, enforce %v", err, sc.Spec.SlurmNodes.Accounting.Enforce)
	}
}

// crdClient reads and writes CRDs as the API server's administrator.
func crdClient(t *testing.T, env *envtest.Environment) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitServed waits until the API server serves SlurmClusters.
func waitServed(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	waitFor(ctx, t, "SlurmClusters served", func() (bool, string) {
		err := c.List(ctx, &slurmv1alpha1.SlurmClusterList{})
		return err == nil, fmt.Sprint(err)
	})
}

// waitFor polls cond for up to a minute.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within a minute; last: %s", what, last)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
