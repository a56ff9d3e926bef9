package slurm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// hostTopology reads this machine's CPU layout as the kernel reports it (what slurmd's hwloc
// finds): sockets, cores per socket, threads per core.
func hostTopology(t *testing.T) slurmv1alpha1.CPUTopology {
	t.Helper()
	cpus, err := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/topology")
	if err != nil || len(cpus) == 0 {
		t.Skipf("no CPU topology in /sys: %v", err)
	}
	read := func(dir, name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	packages, cores := map[string]bool{}, map[string]bool{}
	for _, dir := range cpus {
		p := read(dir, "physical_package_id")
		packages[p] = true
		cores[p+"/"+read(dir, "core_id")] = true
	}
	s, c := len(packages), len(cores)/len(packages)
	return slurmv1alpha1.CPUTopology{Sockets: int32(s), CoresPerSocket: int32(c), ThreadsPerCore: int32(len(cpus) / (s * c))}
}

// With spec.slurmNodes.worker.cpuTopology the node line describes the host: slurmd registers
// the node with that layout (it would be refused, or drained, with a layout larger than the
// host's), the node is idle, and its GPUs are bound to their socket's cores.
func TestTheNodeLineDescribesTheHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo := hostTopology(t)
	host := topo.Sockets * topo.CoresPerSocket * topo.ThreadsPerCore
	sc := spec(t, 1)
	sc.Spec.SlurmNodes.Worker.CPUTopology = &topo
	sc.Spec.SlurmNodes.Worker.Resources.Limits = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(strconv.Itoa(int(host))), corev1.ResourceMemory: resource.MustParse("4Gi"),
	}
	r := render(t, sc)
	c := startCluster(t, ctx, r, 1)

	var node string
	if err := c.WaitFor(ctx, "worker-0 idle", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "scontrol", "-o", "show", "node", "worker-0")
		node = out
		return err == nil && strings.Contains(out, "State=IDLE "), nil
	}); err != nil {
		t.Fatalf("%v: %s", err, node)
	}
	for _, want := range []string{
		fmt.Sprintf("CPUTot=%d ", host),
		fmt.Sprintf("Sockets=%d ", topo.Sockets),
		fmt.Sprintf("CoresPerSocket=%d ", topo.CoresPerSocket),
		fmt.Sprintf("ThreadsPerCore=%d ", topo.ThreadsPerCore),
		fmt.Sprintf("Gres=gpu:h100:%d(S:0", gpusPerWorker),
	} {
		if !strings.Contains(node, want) {
			t.Errorf("worker-0 lacks %q:\n%s", want, node)
		}
	}
	if strings.Contains(node, "Reason=") {
		t.Errorf("worker-0 has a reason (a layout Slurm refused?):\n%s", node)
	}
}
