// Package e2e runs the user's workflows end to end with the real binaries.
package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTheDemoShowsAReconciledCluster runs make demo's entry point (hack/demo.sh up) in its
// control-plane mode, as a user without root gets it: the manager with --local, here with
// --local-once so it exits; and checks what it prints. The full demo, a cluster to log in to,
// runs in the node test, whose install is the same script's.
func TestTheDemoShowsAReconciledCluster(t *testing.T) {
	realComponents(t, "starts a local control plane")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := managerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack/demo.sh"), "up")
	cmd.Env = append(os.Environ(), "DEMO_MODE=control-plane", "DEMO_MANAGER="+bin,
		"DEMO_FLAGS=--local-once --zap-log-level=error --local-kubeconfig "+filepath.Join(t.TempDir(), "kubeconfig"))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"demo: the control-plane demo (the objects the operator writes; no pod runs), because DEMO_MODE=control-plane asks for it.",
		"NAME      WORKERS   GPUS   LOGIN",
		"fpt-hpc   0/8       8",
		"statefulset.apps/fpt-hpc-worker",
		"service/fpt-hpc-login            LoadBalancer",
		"secret/fpt-hpc-munge-key",
		"AccountingAvailable=False (MariaDBOperatorMissing)",
		"NodeName=worker-[0-7] NodeAddr=fpt-hpc-worker-[0-7]",
		"PartitionName=main Nodes=worker-[0-7] Default=YES",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", text)
	}
}
