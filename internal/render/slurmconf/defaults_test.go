package slurmconf

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

func defaultsInput(cpu, memory string, gpus int32, cfg slurmv1alpha1.SlurmConfig) base.Input {
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Spec.SlurmConfig = cfg
	if cpu != "" || memory != "" {
		sc.Spec.SlurmNodes.Worker.Resources.Limits = corev1.ResourceList{}
	}
	if cpu != "" {
		sc.Spec.SlurmNodes.Worker.Resources.Limits[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		sc.Spec.SlurmNodes.Worker.Resources.Limits[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return base.Input{Cluster: sc, GPU: base.GPU{Count: gpus}}
}

func TestSchedulingDefaultsLetAWholeNodeAndASharedNodeJobRun(t *testing.T) {
	for _, tc := range []struct {
		name       string
		in         base.Input
		want       SchedulingDefaults
		warnNaming string
	}{
		{"8-GPU node with 100 CPUs: a GPU's share of CPUs and memory", defaultsInput("100", "1200Gi", 8, slurmv1alpha1.SlurmConfig{}),
			SchedulingDefaults{CPUPerGPU: 12, MemPerCPUMiB: (1200*1024 - 16384) / 100}, ""},
		{"H100 host, 224 CPUs", defaultsInput("224", "2000Gi", 8, slurmv1alpha1.SlurmConfig{}),
			SchedulingDefaults{CPUPerGPU: 28, MemPerCPUMiB: (2000*1024 - 16384) / 224}, ""},
		{"CPU-only: memory per CPU, no CPUs per GPU", defaultsInput("64", "256Gi", 0, slurmv1alpha1.SlurmConfig{}),
			SchedulingDefaults{MemPerCPUMiB: (256*1024 - 256*1024/20) / 64}, ""},
		{"nothing known: Slurm's own defaults", defaultsInput("", "", 8, slurmv1alpha1.SlurmConfig{}), SchedulingDefaults{}, ""},
		{"an explicit value that fits", defaultsInput("100", "", 8, slurmv1alpha1.SlurmConfig{DefCPUPerGPU: ptr.To[int32](12)}),
			SchedulingDefaults{CPUPerGPU: 12}, ""},
		{"16 CPUs per GPU × 8 GPUs on 100 CPUs: 12 is used", defaultsInput("100", "", 8, slurmv1alpha1.SlurmConfig{DefCPUPerGPU: ptr.To[int32](16)}),
			SchedulingDefaults{CPUPerGPU: 12}, "spec.slurmConfig.defCpuPerGPU"},
		{"an explicit DefMemPerNode wins over the derived per-CPU memory", defaultsInput("8", "64Gi", 0, slurmv1alpha1.SlurmConfig{DefMemPerNode: ptr.To[int64](4096)}),
			SchedulingDefaults{MemPerNodeMiB: 4096}, ""},
		{"DefMemPerNode larger than the node: the node's memory is used", defaultsInput("8", "64Gi", 0, slurmv1alpha1.SlurmConfig{DefMemPerNode: ptr.To[int64](70000)}),
			SchedulingDefaults{MemPerNodeMiB: 64*1024 - 3276}, "spec.slurmConfig.defMemPerNode"},
		{"DefMemPerCPU × CPUs larger than the node: a CPU's share is used", defaultsInput("8", "64Gi", 0, slurmv1alpha1.SlurmConfig{DefMemPerCPU: ptr.To[int64](16384)}),
			SchedulingDefaults{MemPerCPUMiB: (64*1024 - 3276) / 8}, "spec.slurmConfig.defMemPerCPU"},
	} {
		got, warnings := Defaults(tc.in)
		switch {
		case tc.warnNaming != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warnNaming)):
			t.Errorf("%s: want one warning naming %s, got %q", tc.name, tc.warnNaming, warnings)
		case tc.warnNaming == "" && len(warnings) > 0:
			t.Errorf("%s: %q", tc.name, warnings)
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		// Whatever is used, a job asking for a whole node fits in it.
		{
			res := WorkerResources(tc.in.Cluster)
			if g := int64(tc.in.GPU.Total()); res.CPUs > 0 && got.CPUPerGPU*g > res.CPUs {
				t.Errorf("%s: %d CPUs per GPU × %d GPUs > %d CPUs", tc.name, got.CPUPerGPU, g, res.CPUs)
			}
			if res.CPUs > 0 && res.RealMemoryMiB > 0 && got.MemPerCPUMiB*res.CPUs > res.RealMemoryMiB {
				t.Errorf("%s: %d MiB per CPU × %d CPUs > %d MiB", tc.name, got.MemPerCPUMiB, res.CPUs, res.RealMemoryMiB)
			}
		}
	}
}
