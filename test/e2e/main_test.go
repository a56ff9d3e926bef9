package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

var (
	managerOnce sync.Once
	managerPath string
	managerErr  error
)

// managerBinary builds cmd/manager once for the package's tests.
func managerBinary(t *testing.T) string {
	t.Helper()
	managerOnce.Do(func() {
		root, _ := filepath.Abs(filepath.Join("..", ".."))
		dir, err := os.MkdirTemp("", "e2e-manager-")
		if err != nil {
			managerErr = err
			return
		}
		managerPath = filepath.Join(dir, "manager")
		build := exec.Command("go", "build", "-o", managerPath, "./cmd/manager")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			managerErr = fmt.Errorf("build manager: %w\n%s", err, out)
		}
	})
	if managerErr != nil {
		t.Fatal(managerErr)
	}
	return managerPath
}

// apiServer starts a real API server with the CRDs in crdDirs (stopped when the test ends), makes
// the namespaces, and returns it with an admin client, its kubeconfig and the real kubectl.
func apiServer(ctx context.Context, t *testing.T, crdDirs []string, namespaces ...string) (*envtest.Environment, client.Client, string, string) {
	t.Helper()
	env, c, kubeconfig, err := kube.StartEnv(crdDirs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubectl, err := kube.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	return env, c, kubeconfig, kubectl
}
