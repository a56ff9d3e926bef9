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
// spec leaves them unset, and a value of the spec with which a job asking for a whole node
// could not start is not used: the largest value that fits is, and a warning says so.
type SchedulingDefaults struct {
	CPUPerGPU     int64
	MemPerCPUMiB  int64
	MemPerNodeMiB int64
}

// Defaults derives the scheduling defaults of the cluster's workers. Each warning names a spec
// field whose value was not used, and why.
func Defaults(in base.Input) (SchedulingDefaults, []string) {
	cfg := in.Cluster.Spec.SlurmConfig
	res := WorkerResources(in.Cluster)
	gpus := int64(in.GPU.Total())
	var d SchedulingDefaults
	var warnings []string

	// CPUs ÷ GPUs, in whole cores: Slurm allocates cores (CR_Core), so a share of 25 CPUs on a
	// host with two threads a core takes 13 cores, and eight such jobs would not fit.
	fair := int64(0)
	if gpus > 0 && res.CPUs >= gpus {
		fair = res.CPUs / gpus
		if t := res.Topology; t != nil && t.ThreadsPerCore > 1 && fair >= t.ThreadsPerCore {
			fair -= fair % t.ThreadsPerCore
		}
	}
	switch v := cfg.DefCPUPerGPU; {
	case gpus == 0:
	case v != nil && res.CPUs > 0 && int64(*v)*gpus > res.CPUs:
		warnings = append(warnings, fmt.Sprintf("spec.slurmConfig.defCpuPerGPU is not used: %d CPUs per GPU × %d GPUs = %d CPUs, more than a worker's %d (spec.slurmNodes.worker.resources), so a job asking for every GPU of a node without -c could never start; %d is used, the largest that fits",
			*v, gpus, int64(*v)*gpus, res.CPUs, fair))
		d.CPUPerGPU = fair
	case v != nil:
		d.CPUPerGPU = int64(*v)
	default:
		d.CPUPerGPU = fair
	}

	perCPU := int64(0)
	if res.CPUs > 0 && res.RealMemoryMiB >= res.CPUs {
		perCPU = res.RealMemoryMiB / res.CPUs
	}
	switch {
	case cfg.DefMemPerNode != nil && res.RealMemoryMiB > 0 && *cfg.DefMemPerNode > res.RealMemoryMiB:
		warnings = append(warnings, fmt.Sprintf("spec.slurmConfig.defMemPerNode is not used: %d MiB is more than a worker's RealMemory of %d MiB (spec.slurmNodes.worker.resources), so a job asking for no memory could never start; %d MiB is used",
			*cfg.DefMemPerNode, res.RealMemoryMiB, res.RealMemoryMiB))
		d.MemPerNodeMiB = res.RealMemoryMiB
	case cfg.DefMemPerNode != nil:
		d.MemPerNodeMiB = *cfg.DefMemPerNode
	case cfg.DefMemPerCPU != nil && perCPU > 0 && *cfg.DefMemPerCPU*res.CPUs > res.RealMemoryMiB:
		warnings = append(warnings, fmt.Sprintf("spec.slurmConfig.defMemPerCPU is not used: %d MiB per CPU × %d CPUs = %d MiB, more than a worker's RealMemory of %d MiB (spec.slurmNodes.worker.resources), so a job with a node's every CPU and no --mem could never start; %d MiB is used, the largest that fits",
			*cfg.DefMemPerCPU, res.CPUs, *cfg.DefMemPerCPU*res.CPUs, res.RealMemoryMiB, perCPU))
		d.MemPerCPUMiB = perCPU
	case cfg.DefMemPerCPU != nil:
		d.MemPerCPUMiB = *cfg.DefMemPerCPU
	default:
		d.MemPerCPUMiB = perCPU
	}
	return d, warnings
}
