package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

// TestKustomizeInstallsTheOperator applies config/default with kubectl's kustomize, as a
// server-side dry run on a real API server: every object is admitted as it would be installed.
func TestKustomizeInstallsTheOperator(t *testing.T) {
	realComponents(t, "needs kubectl and a real API server")
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, c, kubeconfig, err := kube.StartEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	kubectl, err := kube.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	// A dry run creates nothing, so the objects in the namespace need it to exist already.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "slurm-system"}}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "apply", "-k", filepath.Join(root, "config", "default"), "--dry-run=server").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k config/default --dry-run=server: %v\n%s", err, out)
	}
	for _, want := range []string{
		"customresourcedefinition.apiextensions.k8s.io/slurmclusters.slurm.hpc.dev created",
		"serviceaccount/slurm-operator created",
		"clusterrole.rbac.authorization.k8s.io/slurm-operator created",
		"clusterrolebinding.rbac.authorization.k8s.io/slurm-operator created",
		"service/slurm-operator-metrics created",
		"deployment.apps/slurm-operator created",
	} {
		if !strings.Contains(string(out), want+" (server dry run)") {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}
