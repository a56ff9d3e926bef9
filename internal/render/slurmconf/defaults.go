package slurmconf

import (
	"fmt"
	"slices"
	"strings"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
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

	fair := fairCPUsPerGPU(res, gpus)
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

	perCPU := memPerCPU(res)
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

// fairCPUsPerGPU is CPUs ÷ GPUs, in whole cores: Slurm allocates cores (CR_Core), so a share
// of 25 CPUs on a host with two threads a core takes 13 cores, and eight such jobs would not
// fit. Zero when it cannot be derived.
func fairCPUsPerGPU(res NodeResources, gpus int64) int64 {
	if gpus <= 0 || res.CPUs < gpus {
		return 0
	}
	fair := res.CPUs / gpus
	if t := res.Topology; t != nil && t.ThreadsPerCore > 1 && fair >= t.ThreadsPerCore {
		fair -= fair % t.ThreadsPerCore
	}
	return fair
}

// memPerCPU is a node's memory ÷ its CPUs, in MiB; zero when it cannot be derived.
func memPerCPU(res NodeResources) int64 {
	if res.CPUs > 0 && res.RealMemoryMiB >= res.CPUs {
		return res.RealMemoryMiB / res.CPUs
	}
	return 0
}

// PartitionDefaults are the scheduling defaults a partition needs of its own. The cluster's
// (Defaults) are derived from spec.slurmNodes.worker; where one would not let a job asking
// for a whole node of one of the partition's node sets start (more memory per CPU than the
// set's nodes have, more CPUs per GPU, more memory per node), the partition gets the largest
// value that fits every one of its sets. A key the partition's options set is left to them.
func PartitionDefaults(in base.Input, p slurmv1alpha1.Partition, d SchedulingDefaults) []string {
	memPerCPUMiB, cpuPerGPU, memPerNodeMiB := d.MemPerCPUMiB, d.CPUPerGPU, d.MemPerNodeMiB
	for _, set := range in.WorkerSets() {
		if len(p.NodeSets) > 0 && !slices.Contains(p.NodeSets, set.Name) {
			continue
		}
		res := SetResources(set.Worker)
		if v := memPerCPU(res); v > 0 && memPerCPUMiB > v {
			memPerCPUMiB = v
		}
		if v := fairCPUsPerGPU(res, int64(in.GPUOf(set.Name).Total())); v > 0 && cpuPerGPU > v {
			cpuPerGPU = v
		}
		if v := res.RealMemoryMiB; v > 0 && memPerNodeMiB > v {
			memPerNodeMiB = v
		}
	}
	// Slurm reads keys in any case: defmempercpu=1000 in the options is the partition's own.
	opts := " " + strings.ToLower(p.Options)
	set := func(key string) bool { return strings.Contains(opts, " "+strings.ToLower(key)+"=") }
	memSet := set("DefMemPerCPU") || set("DefMemPerNode") || set("DefMemPerGPU")
	var out []string
	if memPerNodeMiB < d.MemPerNodeMiB && !memSet {
		out = append(out, fmt.Sprintf("DefMemPerNode=%d", memPerNodeMiB))
	}
	if memPerCPUMiB < d.MemPerCPUMiB && !memSet {
		out = append(out, fmt.Sprintf("DefMemPerCPU=%d", memPerCPUMiB))
	}
	if cpuPerGPU < d.CPUPerGPU && !set("DefCpuPerGPU") {
		out = append(out, fmt.Sprintf("DefCpuPerGPU=%d", cpuPerGPU))
	}
	return out
}
