package slurmconf_test

import (
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
)

func TestANodeSetRequestAboveItsLimitIsRefusedWithTheFieldNamed(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_nodesets")
	if err != nil {
		t.Fatal(err)
	}
	if err := slurmconf.CheckNodeSetResources(sc); err != nil {
		t.Fatalf("the sample is refused: %v", err)
	}
	sc.Spec.SlurmNodes.NodeSets[1].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32")}
	err = slurmconf.CheckNodeSetResources(sc)
	if err == nil || !strings.Contains(err.Error(), "spec.slurmNodes.nodeSets[1].resources.requests.cpu: 32 is more than its limit 16") {
		t.Fatalf("want the request above its limit refused, got %v", err)
	}
	sc.Spec.SlurmNodes.NodeSets[1].Resources.Requests = corev1.ResourceList{"rdma/ib": resource.MustParse("1")}
	if err := slurmconf.CheckNodeSetResources(sc); err == nil || !strings.Contains(err.Error(), "nodeSets[1].resources.requests.rdma/ib: an extended resource") {
		t.Fatalf("want an overcommitted extended resource refused, got %v", err)
	}
}

// The health check expects each node's own set's GPUs: the script, run by /bin/sh with the node
// name slurmd gives it, picks 8 for the default workers, 4 for a100-N and 0 for cpu-N.
func TestTheHealthCheckExpectsEachSetsGPUs(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_nodesets")
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.PeriodicChecks = &slurmv1alpha1.PeriodicChecks{Enabled: true}
	script := slurmconf.Files(fixtures.Input(sc))[slurmconf.NodeHealthScript]
	var line string
	for _, l := range strings.Split(script, "\n") {
		if strings.HasPrefix(l, "EXPECTED_GPUS=") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("no EXPECTED_GPUS line in the health check")
	}
	for node, want := range map[string]string{"worker-3": "8", "a100-1": "4", "cpu-0": "0", "a1000-0": "8"} {
		cmd := exec.Command("/bin/sh", "-c", line+"\necho $EXPECTED_GPUS")
		cmd.Env = []string{"SLURMD_NODENAME=" + node}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", line, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("node %s: the health check expects %s GPUs, want %s (%s)", node, got, want, line)
		}
	}
}
