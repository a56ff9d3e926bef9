package slurmconf

import (
	"fmt"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// SchedulingDefaults are what a job gets when it asks for no CPUs or memory: Slurm's
// DefCpuPerGPU, DefMemPerCPU and DefMemPerNode. Zero leaves a key out.
//
// Without them a job asking for one GPU and no memory takes the node's whole memory
// (SelectTypeParameters=CR_Core_Memory), so GPU nodes are never shared; and a DefCpuPerGPU
// larger than the node's CPUs divided by its GPUs makes a job asking for every GPU of a node
// impossible. So the defaults are derived from the worker's CPUs, memory and GPUs when the
// spec leaves them unset, and the spec's own values are refused when a job asking for a whole
// node could not start with them.
type SchedulingDefaults struct {
	CPUPerGPU     int64
	MemPerCPUMiB  int64
	MemPerNodeMiB int64
}

// Defaults derives the scheduling defaults of the cluster's workers. The error names the spec
// field whose value would make a job asking for a whole node impossible.
func Defaults(in base.Input) (SchedulingDefaults, error) {
	cfg := in.Cluster.Spec.SlurmConfig
	res := WorkerResources(in.Cluster)
	gpus := int64(in.GPU.Total())
	var d SchedulingDefaults

	switch v := cfg.DefCPUPerGPU; {
	case gpus == 0:
	case v != nil && res.CPUs > 0 && int64(*v)*gpus > res.CPUs:
		return d, fmt.Errorf("spec.slurmConfig.defCpuPerGPU: %d CPUs per GPU × %d GPUs = %d CPUs, more than a worker's %d (spec.slurmNodes.worker.resources): a job asking for every GPU of a node without -c could never start; set at most %d, or leave it unset to derive it",
			*v, gpus, int64(*v)*gpus, res.CPUs, res.CPUs/gpus)
	case v != nil:
		d.CPUPerGPU = int64(*v)
	case res.CPUs >= gpus:
		d.CPUPerGPU = res.CPUs / gpus
	}

	switch {
	case cfg.DefMemPerNode != nil:
		if res.RealMemoryMiB > 0 && *cfg.DefMemPerNode > res.RealMemoryMiB {
			return d, fmt.Errorf("spec.slurmConfig.defMemPerNode: %d MiB, more than a worker's RealMemory of %d MiB (spec.slurmNodes.worker.resources): a job asking for no memory could never start",
				*cfg.DefMemPerNode, res.RealMemoryMiB)
		}
		d.MemPerNodeMiB = *cfg.DefMemPerNode
	case cfg.DefMemPerCPU != nil:
		if res.CPUs > 0 && res.RealMemoryMiB > 0 && *cfg.DefMemPerCPU*res.CPUs > res.RealMemoryMiB {
			return d, fmt.Errorf("spec.slurmConfig.defMemPerCPU: %d MiB per CPU × %d CPUs = %d MiB, more than a worker's RealMemory of %d MiB (spec.slurmNodes.worker.resources): a job with a node's every CPU and no --mem could never start; set at most %d, or leave it unset to derive it",
				*cfg.DefMemPerCPU, res.CPUs, *cfg.DefMemPerCPU*res.CPUs, res.RealMemoryMiB, res.RealMemoryMiB/res.CPUs)
		}
		d.MemPerCPUMiB = *cfg.DefMemPerCPU
	case res.CPUs > 0 && res.RealMemoryMiB >= res.CPUs:
		d.MemPerCPUMiB = res.RealMemoryMiB / res.CPUs
	}
	return d, nil
}
