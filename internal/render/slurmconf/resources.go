package slurmconf

import (
	"fmt"
	"slices"

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
	// CPUs jobs can use: the CPU limit (or request), or with a topology and no limit, the host's.
	CPUs          int64
	RealMemoryMiB int64
	// Topology, when the spec gives it: the host's CPUs (Sockets × CoresPerSocket ×
	// ThreadsPerCore) and the cores kept for the system because the CPU limit leaves them out.
	Topology *Topology
}

// Topology is the node line's description of a worker's host.
type Topology struct {
	Sockets, CoresPerSocket, ThreadsPerCore int64
	// CoreSpecCount is the cores reserved for the system (slurmd, sshd, the OS).
	CoreSpecCount int64
}

// HostCPUs is Sockets × CoresPerSocket × ThreadsPerCore.
func (t Topology) HostCPUs() int64 { return t.Sockets * t.CoresPerSocket * t.ThreadsPerCore }

// WorkerResources derives a worker's Slurm CPUs and RealMemory from its container's limits (or
// requests). Zero means unknown: the key is left out and slurmd reports the hardware.
func WorkerResources(sc *slurmv1alpha1.SlurmCluster) NodeResources {
	return SetResources(sc.Spec.SlurmNodes.Worker)
}

// SetResources derives the Slurm CPUs and RealMemory of a worker set's nodes (WorkerResources).
func SetResources(w slurmv1alpha1.Worker) NodeResources {
	r := w.Resources
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
	if t := w.CPUTopology; t != nil {
		topo := Topology{Sockets: int64(t.Sockets), CoresPerSocket: int64(t.CoresPerSocket), ThreadsPerCore: int64(t.ThreadsPerCore)}
		switch host := topo.HostCPUs(); {
		case out.CPUs == 0 || out.CPUs > host:
			// No limit: the whole host. A limit above the host is refused (CheckTopology).
			out.CPUs = host
		case out.CPUs < host:
			// Whole cores the limit leaves out are kept for the system; jobs get the rest.
			topo.CoreSpecCount = (host - out.CPUs + topo.ThreadsPerCore - 1) / topo.ThreadsPerCore
			out.CPUs = host - topo.CoreSpecCount*topo.ThreadsPerCore
		}
		out.Topology = &topo
	}
	if bytes, _, ok := pick(corev1.ResourceMemory); ok {
		total := bytes / (1024 * 1024)
		if mem := total - MemoryHeadroomMiB(total); mem > 0 {
			out.RealMemoryMiB = mem
		}
	}
	return out
}

// CheckTopology refuses a CPU limit larger than the host a worker set's cpuTopology describes:
// Slurm would be told of CPUs the host does not have.
func CheckTopology(sc *slurmv1alpha1.SlurmCluster) error {
	for i, set := range sc.WorkerSets() {
		field := "spec.slurmNodes.worker"
		if i > 0 {
			field = fmt.Sprintf("spec.slurmNodes.nodeSets[%d]", i-1)
		}
		if err := checkTopology(set.Worker, field); err != nil {
			return err
		}
	}
	return nil
}

func checkTopology(w slurmv1alpha1.Worker, field string) error {
	t := w.CPUTopology
	if t == nil {
		return nil
	}
	host := int64(t.Sockets) * int64(t.CoresPerSocket) * int64(t.ThreadsPerCore)
	r := w.Resources
	for _, list := range []corev1.ResourceList{r.Limits, r.Requests} {
		if q, ok := list[corev1.ResourceCPU]; ok {
			if q.MilliValue()/1000 > host {
				return fmt.Errorf("%[1]s.resources: %[2]s CPUs, more than the %[3]d of %[1]s.cpuTopology (%[4]d sockets × %[5]d cores × %[6]d threads)",
					field, q.String(), host, t.Sockets, t.CoresPerSocket, t.ThreadsPerCore)
			}
			// The cores the limit leaves out are kept for the system; at least one whole core
			// must be left to jobs, or Slurm refuses the node.
			if q.MilliValue()/1000 < int64(t.ThreadsPerCore) {
				return fmt.Errorf("%[1]s.resources: %[2]s CPUs, less than one core of %[1]s.cpuTopology (%[3]d threads): jobs would have no CPU",
					field, q.String(), t.ThreadsPerCore)
			}
			break
		}
	}
	return nil
}

// CheckNodeSetResources refuses what the API server cannot check at admission within its cost
// limits for every node set: a request above its limit, and an extended resource or huge pages
// requested without a limit of the same amount (Kubernetes would refuse the pods).
func CheckNodeSetResources(sc *slurmv1alpha1.SlurmCluster) error {
	for i, ns := range sc.Spec.SlurmNodes.NodeSets {
		if ns.Resources == nil {
			continue
		}
		field := fmt.Sprintf("spec.slurmNodes.nodeSets[%d].resources.requests", i)
		for _, k := range sortedNames(ns.Resources.Requests) {
			req := ns.Resources.Requests[k]
			limit, limited := ns.Resources.Limits[k]
			overcommittable := k == corev1.ResourceCPU || k == corev1.ResourceMemory || k == corev1.ResourceEphemeralStorage
			switch {
			case limited && req.Cmp(limit) > 0:
				return fmt.Errorf("%s.%s: %s is more than its limit %s", field, k, req.String(), limit.String())
			case !overcommittable && (!limited || req.Cmp(limit) != 0):
				return fmt.Errorf("%s.%s: an extended resource or huge pages cannot be overcommitted: set a limit of the same amount", field, k)
			}
		}
	}
	return nil
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
