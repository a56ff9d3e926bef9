package slurmconf

import (
	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// MemoryHeadroomMiB is the memory left to slurmd, munged, sshd and the container runtime when
// a worker's RealMemory is derived from its container memory: 5% of it, at least 1 GiB and at
// most 16 GiB.
func MemoryHeadroomMiB(totalMiB int64) int64 {
	h := totalMiB / 20
	if h < 1024 {
		h = 1024
	}
	if h > 16384 {
		h = 16384
	}
	return h
}

// NodeResources are the CPUs and memory a worker offers to Slurm jobs.
type NodeResources struct {
	CPUs          int64
	RealMemoryMiB int64
}

// WorkerResources derives a worker's Slurm CPUs and RealMemory from its container's limits (or
// requests). Zero means unknown: the key is left out and slurmd reports the hardware.
func WorkerResources(sc *slurmv1alpha1.SlurmCluster) NodeResources {
	r := sc.Spec.SlurmNodes.Worker.Resources
	pick := func(name corev1.ResourceName) (q int64, milli int64, ok bool) {
		if v, found := r.Limits[name]; found {
			return v.Value(), v.MilliValue(), true
		}
		if v, found := r.Requests[name]; found {
			return v.Value(), v.MilliValue(), true
		}
		return 0, 0, false
	}
	var out NodeResources
	if _, milli, ok := pick(corev1.ResourceCPU); ok {
		out.CPUs = milli / 1000 // whole CPUs only
	}
	if bytes, _, ok := pick(corev1.ResourceMemory); ok {
		total := bytes / (1024 * 1024)
		if mem := total - MemoryHeadroomMiB(total); mem > 0 {
			out.RealMemoryMiB = mem
		}
	}
	return out
}
