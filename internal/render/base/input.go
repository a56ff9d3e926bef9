package base

import (
	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// Input is everything a cluster is rendered from. The controller gathers it (reading Secrets,
// node labels, API discovery); the renderers only read it.
type Input struct {
	// Cluster is the SlurmCluster with defaults applied (see WithDefaults).
	Cluster *slurmv1alpha1.SlurmCluster
	// Keys are the cluster's generated secrets.
	Keys Keys
	// GPU is the GPU shape of each worker; zero Count means CPU-only workers.
	GPU GPU
	// ClusterDomain is the Kubernetes DNS domain (cluster.local by default).
	ClusterDomain string
	// Database is where slurmdbd stores accounting, when accounting is enabled.
	Database Database
	// Optional says which optional APIs the Kubernetes cluster serves.
	Optional OptionalAPIs
	// Workers is how many workers to render (the StatefulSet's replicas and slurm.conf's node
	// list): the spec's size, or more while leaving workers still drain. Nil: the spec's size.
	Workers *int32
	// SetGPUs is the GPU shape of each node set's workers, by set name (spec.slurmNodes.worker's
	// is GPU). A set missing here has CPU-only workers.
	SetGPUs map[string]GPU
	// SetWorkers is how many workers of each node set to render, by set name, as Workers is for
	// spec.slurmNodes.worker. A set missing here: its size.
	SetWorkers map[string]int32
	// SetPods is how many pods of each elastic set (autoscaling on) to render, by set name: the
	// nodes Slurm has powered up, from <set>-0 on. A set missing here has a pod for every node.
	SetPods map[string]int32
	// NodeAddresses are the pod addresses of the cluster's Slurm nodes, by Slurm node name
	// (controller-0, worker-3, login-1), sorted: the names users ssh to.
	NodeAddresses []NodeAddress
	// Placements are where the workers run, for spec.slurmConfig.topology: each placed worker's
	// Slurm node name and the topology labels of its Kubernetes node (only the labels the
	// topology names). A worker whose pod is on no node yet is not listed.
	Placements []WorkerPlacement
	// ControlPlanePriorityClass, when set, is the PriorityClass of the control-plane pods
	// (slurmctld, slurmdbd, the MariaDB of mariadb-operator): the installer's choice, from the
	// manager's flags.
	ControlPlanePriorityClass string
	// Operator is where the operator's own pods run, for the NetworkPolicy that lets them reach
	// slurmrestd. Empty when the manager runs outside the cluster.
	Operator OperatorPods
}

// OperatorPods names the operator's pods: their namespace and labels.
type OperatorPods struct {
	Namespace string
	PodLabels map[string]string
}

// WorkerPlacement is the Kubernetes node a worker runs on, as the topology sees it.
type WorkerPlacement struct {
	// Name is the worker's Slurm node name (worker-3).
	Name string
	// Node is the Kubernetes node's name.
	Node string
	// Labels are the node's labels that spec.slurmConfig.topology names.
	Labels map[string]string
}

// NodeAddress is the address of the pod that runs a Slurm node.
type NodeAddress struct {
	// Name is the Slurm node name (worker-3).
	Name string
	// Pod is the pod's name.
	Pod string
	// IP is the pod's address.
	IP string
}

// WorkerCount is how many workers to render. The spec's size stays the user's target.
func (in Input) WorkerCount() int32 {
	if in.Workers != nil {
		return *in.Workers
	}
	return in.Cluster.Spec.SlurmNodes.Worker.NodeCount()
}

// GPUOf is the GPU shape of a worker set's workers.
func (in Input) GPUOf(set string) GPU {
	if set == slurmv1alpha1.DefaultNodeSet {
		return in.GPU
	}
	return in.SetGPUs[set]
}

// WorkerCountOf is how many workers of a set to render.
func (in Input) WorkerCountOf(set slurmv1alpha1.WorkerSet) int32 {
	if set.Default() {
		return in.WorkerCount()
	}
	if n, ok := in.SetWorkers[set.Name]; ok {
		return n
	}
	return set.Worker.NodeCount()
}

// PodCountOf is how many pods of a set to render (its StatefulSet's replicas): one per node,
// or for an elastic set the nodes Slurm has powered up (none until the operator has asked).
func (in Input) PodCountOf(set slurmv1alpha1.WorkerSet) int32 {
	n := in.WorkerCountOf(set)
	if !set.Worker.Elastic() {
		return n
	}
	if p, ok := in.SetPods[set.Name]; ok {
		return min(p, n)
	}
	return min(n, set.Worker.Autoscaling.MinSize)
}

// WorkerSets are the cluster's worker sets (slurmNodes.worker, then the node sets).
func (in Input) WorkerSets() []slurmv1alpha1.WorkerSet { return in.Cluster.WorkerSets() }

// TotalWorkers is how many workers of every set to render.
func (in Input) TotalWorkers() int32 {
	var n int32
	for _, s := range in.WorkerSets() {
		n += in.WorkerCountOf(s)
	}
	return n
}

// HasGPUWorkers says whether any worker set has GPUs and workers to render.
func (in Input) HasGPUWorkers() bool {
	for _, s := range in.WorkerSets() {
		if in.GPUOf(s.Name).Total() > 0 && in.WorkerCountOf(s) > 0 {
			return true
		}
	}
	return false
}

// ExporterTokenKey is the exporter's token's key in its Secret (Keys.ExporterToken).
const ExporterTokenKey = "token"

// Keys are generated once by the controller and never regenerated while their Secrets exist.
type Keys struct {
	// Munge is the munge key shared by every Slurm daemon.
	Munge []byte
	// JWT is the HS256 key for slurmrestd and the operator's Slurm client.
	JWT []byte
	// SSHHost maps file names (ssh_host_ed25519_key, …) to OpenSSH host key files.
	SSHHost map[string][]byte
	// ExporterToken is the exporter's JWT for slurmfacts.MetricsUser, signed with JWT; the
	// controller renews it before it expires (the exporter never holds the key).
	ExporterToken []byte
	// DatabasePassword is the accounting database user's password when the operator creates the
	// database through mariadb-operator.
	DatabasePassword []byte
	// SSSDConfigHash is the hash of the admin's SSSD Secret (spec.identity.sssd): its change
	// rolls the pods that run SSSD. Empty without spec.identity.
	SSSDConfigHash string
}

// GPU is the GPU shape of each worker.
type GPU struct {
	// Count is the number of GPUs per worker.
	Count int32
	// Type is the gres type (for example h100); empty renders untyped gres.
	Type string
	// MIG lists the MIG devices of each worker (MIG strategy mixed); when set, Count and Type
	// are unused and gres.conf relies on NVML detection.
	MIG []MIGDevice
	// SingleMIG says the Count devices are MIG devices of one profile (MIG strategy single; Type
	// is the profile): like MIG, only NVML sees them, and they are not whole GPUs.
	SingleMIG bool
	// RequireLabels pins worker pods to nodes with these labels, the shape Slurm was told
	// about: set whenever the shape comes from GPU node labels, so that it does not change
	// (and roll every worker) when one node starts to disagree.
	RequireLabels map[string]string
}

// MIGDevice is a number of MIG devices of one profile (for example 1g.10gb).
type MIGDevice struct {
	Profile string
	Count   int32
}

// MIGDevices says whether the devices are MIG devices (either MIG strategy): gres.conf must
// then rely on NVML, and nvidia-smi -L lists them under their GPU, not as GPUs.
func (g GPU) MIGDevices() bool { return len(g.MIG) > 0 || g.SingleMIG }

// Total is the number of GPU devices (whole GPUs or MIG devices) of each worker.
func (g GPU) Total() int32 {
	if len(g.MIG) == 0 {
		return g.Count
	}
	var n int32
	for _, m := range g.MIG {
		n += m.Count
	}
	return n
}

// Database is the accounting database slurmdbd connects to.
type Database struct {
	Host     string
	Port     int32
	User     string
	Password string
	Name     string
}

// OptionalAPIs records which optional custom resources the cluster serves.
type OptionalAPIs struct {
	// MariaDB is true when mariadb-operator's k8s.mariadb.com API is served.
	MariaDB bool
	// ServiceMonitor is true when the Prometheus operator's monitoring.coreos.com API is served.
	ServiceMonitor bool
}
