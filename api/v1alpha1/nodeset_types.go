package v1alpha1

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// DefaultNodeSet is the node set of spec.slurmNodes.worker: its nodes are worker-0 … worker-N.
const DefaultNodeSet = "worker"

// LabelNodeSet, on a worker pod, names its node set. The pods of spec.slurmNodes.worker carry
// none (their StatefulSet's selector predates node sets and cannot change).
const LabelNodeSet = "slurm.hpc.dev/node-set"

// AnnotationNodeSet, on a node set's StatefulSet, holds the set's spec as last rendered (JSON):
// when the set leaves spec.slurmNodes.nodeSets, the operator still knows what its draining
// nodes are while jobs finish on them.
const AnnotationNodeSet = "slurm.hpc.dev/node-set-spec"

// NodeSet is a further group of workers with hardware of its own: H100 nodes beside A100 nodes,
// CPU-only nodes, a debug pool. Its Slurm nodes are <name>-0 … <name>-(size-1), run by a
// StatefulSet of their own. Whatever a set does not set is taken from spec.slurmNodes.worker
// (volumes and the jail, ssh, updateStrategy, gresAutoDetect, drainOnNodeConditions,
// sharedMemorySize, scaleDownGracePeriodSeconds).
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !self.autoscaling.enabled || (self.size >= (has(self.autoscaling.minSize) ? self.autoscaling.minSize : 0) && self.size <= self.autoscaling.maxSize)",message="size must be within autoscaling's minSize and maxSize while autoscaling is on: it is the size the set keeps when autoscaling is turned off",fieldPath=".size"
type NodeSet struct {
	// Name of the set: the prefix of its Slurm node names (a100 gives a100-0, a100-1, …) and the
	// suffix of its StatefulSet's name. Lowercase letters and digits, starting with a letter.
	// worker is spec.slurmNodes.worker's; controller, login, accounting, exporter, nodes,
	// mariadb, check and populate are the names of the cluster's other objects.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=11
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9]*$`
	// +kubebuilder:validation:XValidation:rule="!(self in ['worker', 'controller', 'login', 'accounting', 'exporter', 'nodes', 'mariadb', 'check', 'populate', 'slurm', 'munge', 'jwt', 'ssh', 'root', 'upgrade'])",message="is a name the cluster's own objects use: pick another"
	Name string `json:"name"`

	// Size is the number of nodes of the set. Scaling down drains the leaving nodes first, as
	// for spec.slurmNodes.worker.size.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4096
	Size int32 `json:"size"`

	// Autoscaling lets Slurm size the set between minSize and maxSize, as
	// spec.slurmNodes.worker.autoscaling does for the default set. Not taken from
	// spec.slurmNodes.worker: unset, the set has size nodes.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`

	// K8sNodeFilterName picks the Kubernetes nodes the set runs on (an entry of
	// spec.k8sNodeFilters). The set's GPU shape is read from these nodes' GPU Operator labels.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	K8sNodeFilterName string `json:"k8sNodeFilterName,omitempty"`

	// GPU is the number of GPUs of each node of the set. Unset: found from the GPU Operator's
	// labels on the nodes k8sNodeFilterName selects, as for spec.slurmNodes.worker.gpu. 0 makes
	// CPU-only nodes.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	GPU *int32 `json:"gpu,omitempty"`

	// Resources of each node's slurmd container: its CPUs and RealMemory in Slurm follow, as
	// for spec.slurmNodes.worker.resources. GPUs come from gpu, not from here. Unset:
	// spec.slurmNodes.worker.resources.
	// +optional
	Resources *NodeSetResources `json:"resources,omitempty"`

	// CPUTopology is the set's hosts' CPU layout (spec.slurmNodes.worker.cpuTopology). Unset:
	// spec.slurmNodes.worker.cpuTopology.
	// +optional
	CPUTopology *CPUTopology `json:"cpuTopology,omitempty"`

	// Features are Slurm node features of every node of the set (the node line's Features=),
	// which jobs ask for with --constraint.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_.]+$`
	// +listType=set
	// +optional
	Features []string `json:"features,omitempty"`

	// FeaturesFromNodeLabels are label keys of the set's Kubernetes nodes whose values become
	// Slurm features of the set's workers on those nodes
	// (spec.slurmNodes.worker.featuresFromNodeLabels). Unset:
	// spec.slurmNodes.worker.featuresFromNodeLabels.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=316
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +listType=set
	// +optional
	FeaturesFromNodeLabels []string `json:"featuresFromNodeLabels,omitempty"`

	// PodAnnotations go on the set's pods (spec.slurmNodes.worker.podAnnotations). Unset:
	// spec.slurmNodes.worker.podAnnotations.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 8192)",message="every value must be at most 8 KiB: Kubernetes takes at most 256 KiB of annotations on a pod"
	// +kubebuilder:validation:XValidation:rule="self.map(k, size(k) + size(self[k])).sum() <= 131072",message="the annotations must be at most 128 KiB in all (keys and values): Kubernetes takes at most 256 KiB of annotations on a pod, the operator's own included"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('slurm.hpc.dev/'))",message="annotations under slurm.hpc.dev/ are the operator's own"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="every key must be an annotation key: an optional DNS prefix and a slash, then a name of letters, digits, '-', '_' and '.'"
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// Image of the set's slurmd container. Unset: spec.images.worker. Its Slurm must be the
	// cluster's release (docs/upgrades.md).
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Image string `json:"image,omitempty"`
}

// NodeSetStatus counts one node set's pods.
type NodeSetStatus struct {
	// Name of the set.
	Name string `json:"name"`
	// Desired is the set's size (0 for a set that left the spec and still drains).
	Desired int32 `json:"desired"`
	// Replicas is how many pods the set's StatefulSet has.
	Replicas int32 `json:"replicas"`
	// Ready is how many of them are ready: their slurmd answers slurmctld.
	Ready int32 `json:"ready"`
}

// NodeSetResources are a node set's container requests and limits: the resources of
// ContainerResources, with fewer entries, so that the API server can check every set's at
// admission within its cost limits. A request above its limit is refused when the cluster is
// rendered: the status names the field.
type NodeSetResources struct {
	// Limits are the most the container may use.
	// +kubebuilder:validation:MaxProperties=6
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || (k.contains('/') && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')))",message="every resource must be cpu, memory, ephemeral-storage, hugepages-<size>, or a name with a DNS prefix such as rdma/ib"
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`

	// Requests are what the scheduler reserves for the container. An extended resource or huge
	// pages need a limit of the same amount.
	// +kubebuilder:validation:MaxProperties=6
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || (k.contains('/') && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')))",message="every resource must be cpu, memory, ephemeral-storage, hugepages-<size>, or a name with a DNS prefix such as rdma/ib"
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// WorkerSet is one group of workers as the operator renders it: spec.slurmNodes.worker (the set
// "worker"), or a node set with what it leaves unset taken from spec.slurmNodes.worker.
type WorkerSet struct {
	// Name is the set's name, the prefix of its Slurm node names.
	Name string
	// Worker is the set's whole worker spec.
	Worker Worker
	// Image is the slurmd container's image.
	Image string
	// Features are the set's Slurm node features.
	Features []string
}

// Default says whether this is spec.slurmNodes.worker's set.
func (s WorkerSet) Default() bool { return s.Name == DefaultNodeSet }

// WorkerSets are the cluster's worker sets: spec.slurmNodes.worker first, then the node sets in
// the spec's order.
func (c *SlurmCluster) WorkerSets() []WorkerSet {
	w := c.Spec.SlurmNodes.Worker
	out := []WorkerSet{{Name: DefaultNodeSet, Worker: w, Image: c.Spec.Images.Worker, Features: w.Features}}
	for _, ns := range c.Spec.SlurmNodes.NodeSets {
		out = append(out, c.resolveNodeSet(ns))
	}
	return out
}

// WorkerSet is the named worker set, and whether the cluster has it.
func (c *SlurmCluster) WorkerSet(name string) (WorkerSet, bool) {
	for _, s := range c.WorkerSets() {
		if s.Name == name {
			return s, true
		}
	}
	return WorkerSet{}, false
}

func (c *SlurmCluster) resolveNodeSet(ns NodeSet) WorkerSet {
	w := *c.Spec.SlurmNodes.Worker.DeepCopy()
	w.Size = ns.Size
	w.Autoscaling = ns.Autoscaling
	w.Features = ns.Features
	w.K8sNodeFilterName = ns.K8sNodeFilterName
	w.GPU = ns.GPU
	if ns.Resources != nil {
		w.Resources = ContainerResources{Limits: ns.Resources.Limits.DeepCopy(), Requests: ns.Resources.Requests.DeepCopy()}
	}
	if ns.CPUTopology != nil {
		w.CPUTopology = ns.CPUTopology.DeepCopy()
	}
	if ns.PodAnnotations != nil {
		w.PodAnnotations = ns.PodAnnotations
	}
	if ns.FeaturesFromNodeLabels != nil {
		w.FeaturesFromNodeLabels = ns.FeaturesFromNodeLabels
	}
	img := c.Spec.Images.Worker
	if ns.Image != "" {
		img = ns.Image
	}
	return WorkerSet{Name: ns.Name, Worker: w, Image: img, Features: ns.Features}
}

// NodeSetSpecJSON is the annotation value that records a node set's spec on its StatefulSet.
func NodeSetSpecJSON(ns NodeSet) string {
	b, _ := json.Marshal(ns)
	return string(b)
}

// WithLeavingNodeSets adds to the spec, with size 0, the node sets that left it while their
// StatefulSets still run pods (recorded is each such StatefulSet's AnnotationNodeSet), so that
// their nodes are drained and stay in slurm.conf until their jobs end. Sets the spec still has,
// and records that do not parse, are left out. It returns the names of the sets it added.
func (c *SlurmCluster) WithLeavingNodeSets(recorded []string) []string {
	var added []string
	for _, r := range recorded {
		var ns NodeSet
		if err := json.Unmarshal([]byte(r), &ns); err != nil || ns.Name == "" || ns.Name == DefaultNodeSet {
			continue
		}
		if _, ok := c.WorkerSet(ns.Name); ok {
			continue
		}
		ns.Size = 0
		ns.Autoscaling = nil // a leaving set drains to no node, elastic or not
		c.Spec.SlurmNodes.NodeSets = append(c.Spec.SlurmNodes.NodeSets, ns)
		added = append(added, ns.Name)
	}
	return added
}
