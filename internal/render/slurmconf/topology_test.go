package slurmconf

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/jailexec"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/golden"
)

// topologyInput is 8 workers of a host with this topology, CPU limit and GPUs.
func topologyInput(topo *slurmv1alpha1.CPUTopology, cpu, memory string, gpus int32, gpuType string) base.Input {
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Name = "demo"
	sc.Namespace = "slurm"
	sc.Spec.ClusterName = "demo"
	sc.Spec.SlurmNodes.Worker.Size = 8
	sc.Spec.SlurmNodes.Worker.CPUTopology = topo
	sc.Spec.SlurmNodes.Worker.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}
	if cpu != "" {
		sc.Spec.SlurmNodes.Worker.Resources.Limits[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	sc = base.WithDefaults(sc)
	return base.Input{Cluster: sc, GPU: base.GPU{Count: gpus, Type: gpuType}, ClusterDomain: base.DefaultClusterDomain}
}

// The node line and gres.conf describe the host as slurmd finds it: goldens for a dual-socket
// H100 host (2 × 56 × 2), an A100 host (2 × 64 × 2) and a CPU-only host, each with a CPU limit
// below the host's CPUs.
func TestTheNodeLineDescribesTheHostsTopology(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   base.Input
	}{
		{"h100", topologyInput(&slurmv1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 56, ThreadsPerCore: 2}, "200", "1800Gi", 8, "h100")},
		{"a100", topologyInput(&slurmv1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 64, ThreadsPerCore: 2}, "", "1000Gi", 8, "a100")},
		{"cpu-only", topologyInput(&slurmv1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 32, ThreadsPerCore: 1}, "60", "256Gi", 0, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckTopology(tc.in.Cluster); err != nil {
				t.Fatal(err)
			}
			if _, warnings := Defaults(tc.in); len(warnings) > 0 {
				t.Fatal(warnings)
			}
			files := Files(tc.in)
			var b strings.Builder
			for _, line := range strings.Split(files[SlurmBaseConf], "\n") {
				if strings.HasPrefix(line, "NodeName=worker") || strings.HasPrefix(line, "Def") || strings.HasPrefix(line, "JobDefaults") {
					b.WriteString(line + "\n")
				}
			}
			b.WriteString("--- gres.conf\n" + files[GresConf])
			// What a worker's entrypoint writes for a pod given every GPU of its host.
			flags := WorkerGPUFlags(tc.in, tc.in.Cluster.WorkerSets()[0])
			b.WriteString("--- worker entrypoint: " + strings.Join(flags, " ") + "\n")
			if tc.in.GPU.Count > 0 {
				// Read as the entrypoint reads its flags.
				var cfg jailexec.Config
				fs := flag.NewFlagSet("slurm-jail-exec", flag.ContinueOnError)
				jailexec.GPUFlags(fs, &cfg)
				if err := fs.Parse(flags); err != nil {
					t.Fatal(err)
				}
				all := make([]int, cfg.GPUs)
				for i := range all {
					all[i] = i
				}
				b.WriteString("--- " + cfg.GresConf + "\n" + jailexec.GresConf(jailexec.PodGPUs{Minors: all, Node: all, From: "every GPU of the host"}, cfg.Gres))
			}
			golden.Check(t, filepath.Join("testdata", "topology-"+tc.name+".golden"), []byte(b.String()))
		})
	}
}

func TestACPULimitAboveTheHostIsRefused(t *testing.T) {
	in := topologyInput(&slurmv1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 56, ThreadsPerCore: 2}, "300", "1800Gi", 8, "")
	err := CheckTopology(in.Cluster)
	if err == nil || !strings.Contains(err.Error(), "spec.slurmNodes.worker.resources") || !strings.Contains(err.Error(), "224") {
		t.Fatalf("want a refusal naming the field and the host's 224 CPUs, got %v", err)
	}
}

func TestACPULimitBelowOneCoreIsRefused(t *testing.T) {
	in := topologyInput(&slurmv1alpha1.CPUTopology{Sockets: 2, CoresPerSocket: 56, ThreadsPerCore: 2}, "1", "64Gi", 0, "")
	if err := CheckTopology(in.Cluster); err == nil || !strings.Contains(err.Error(), "less than one core") {
		t.Fatalf("want a refusal, got %v", err)
	}
}
