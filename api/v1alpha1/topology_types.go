package v1alpha1

// TopologyPlugin is the Slurm topology plugin the operator configures.
// +kubebuilder:validation:Enum=block;tree
type TopologyPlugin string

const (
	// TopologyBlock is topology/block: workers in blocks (an NVLink domain such as a GB200
	// NVL72 rack), jobs kept within as few blocks as they fit in.
	TopologyBlock TopologyPlugin = "block"
	// TopologyTree is topology/tree: workers under leaf switches, switches under higher ones,
	// jobs kept under the lowest switch that holds them.
	TopologyTree TopologyPlugin = "tree"
)

// NetworkTopology is Slurm's network topology (TopologyPlugin and topology.conf), generated from
// the labels of the Kubernetes nodes the workers run on and kept up to date as worker pods move:
// a worker belongs to the block or switches its current node's labels name. A worker whose pod
// is not on a node yet is in no block or switch until it is (Slurm gives it no job before it
// registers). A worker on a node without the label is put in a block or leaf switch named
// "unlabelled" of its own, so that it still runs jobs.
//
// +kubebuilder:validation:XValidation:rule="self.plugin != 'block' || (has(self.blockLabel) && !has(self.switchLabels))",message="the block plugin needs blockLabel, and takes no switchLabels",fieldPath=".blockLabel"
// +kubebuilder:validation:XValidation:rule="self.plugin != 'tree' || (has(self.switchLabels) && !has(self.blockLabel) && !has(self.blockSizes))",message="the tree plugin needs switchLabels, and takes neither blockLabel nor blockSizes",fieldPath=".switchLabels"
type NetworkTopology struct {
	// Plugin is block (topology/block, for NVLink domains: the GPU Operator's clique label on
	// GB200-class systems) or tree (topology/tree, for a switched network: a leaf switch label,
	// then higher ones).
	Plugin TopologyPlugin `json:"plugin"`

	// BlockLabel (block) is the node label whose value names a node's block, for example
	// nvidia.com/gpu.clique or a rack label. Workers on nodes with the same value form one block.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +optional
	BlockLabel string `json:"blockLabel,omitempty"`

	// BlockSizes (block) are Slurm's BlockSizes: the base block size in workers (a job that fits
	// in it is kept in one block), then the larger sizes jobs are packed into, each a power of two
	// times the base. Unset: the smallest block's worker count, and 2, 4, 8 and 16 times it.
	// Slurm 24.11 stops if a block has fewer workers than the base, so while one has (a block
	// still filling, a worker moved away), the operator lowers the base to that block's count,
	// keeps the ratios, and says so in the Degraded condition's warnings.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=32768
	// +kubebuilder:validation:XValidation:rule="self.all(s, s >= self[0] && [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768].exists(p, s == self[0] * p))",message="the first size is the base and the smallest; every other is the base times a power of two"
	// +listType=set
	// +optional
	BlockSizes []int32 `json:"blockSizes,omitempty"`

	// SwitchLabels (tree) are node labels naming a node's switches, the leaf switch's first, then
	// each higher level's (for example a leaf switch label, then a spine label). Every switch of
	// the top level is joined under one root switch, so any job may still span the whole cluster.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=316
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +listType=set
	// +optional
	SwitchLabels []string `json:"switchLabels,omitempty"`
}
