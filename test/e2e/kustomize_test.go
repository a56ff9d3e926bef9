package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKustomizeInstallsTheOperator applies config/default with kubectl's kustomize, as a
// server-side dry run on a real API server: every object is admitted as it would be installed.
func TestKustomizeInstallsTheOperator(t *testing.T) {
	realComponents(t, "needs kubectl and a real API server")
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A dry run creates nothing, so the objects in the namespace need it to exist already.
	_, _, kubeconfig, kubectl := apiServer(ctx, t, nil, "slurm-system")
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
