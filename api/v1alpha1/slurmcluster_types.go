package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SlurmClusterSpec describes a whole Slurm cluster: where its pods run, which volumes they mount,
// how the shared-root jail is populated, how Slurm is configured, and how many of each node there
// are.
//
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.controller.k8sNodeFilterName) || (has(self.k8sNodeFilters) && self.k8sNodeFilters.exists(f, f.name == self.slurmNodes.controller.k8sNodeFilterName))",message="must name an entry of spec.k8sNodeFilters",fieldPath=".slurmNodes.controller.k8sNodeFilterName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.worker.k8sNodeFilterName) || (has(self.k8sNodeFilters) && self.k8sNodeFilters.exists(f, f.name == self.slurmNodes.worker.k8sNodeFilterName))",message="must name an entry of spec.k8sNodeFilters",fieldPath=".slurmNodes.worker.k8sNodeFilterName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.login.k8sNodeFilterName) || (has(self.k8sNodeFilters) && self.k8sNodeFilters.exists(f, f.name == self.slurmNodes.login.k8sNodeFilterName))",message="must name an entry of spec.k8sNodeFilters",fieldPath=".slurmNodes.login.k8sNodeFilterName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.accounting.k8sNodeFilterName) || (has(self.k8sNodeFilters) && self.k8sNodeFilters.exists(f, f.name == self.slurmNodes.accounting.k8sNodeFilterName))",message="must name an entry of spec.k8sNodeFilters",fieldPath=".slurmNodes.accounting.k8sNodeFilterName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.exporter.k8sNodeFilterName) || (has(self.k8sNodeFilters) && self.k8sNodeFilters.exists(f, f.name == self.slurmNodes.exporter.k8sNodeFilterName))",message="must name an entry of spec.k8sNodeFilters",fieldPath=".slurmNodes.exporter.k8sNodeFilterName"
// +kubebuilder:validation:XValidation:rule="!has(self.populateJail) || !has(self.populateJail.k8sNodeFilterName) || (has(self.k8sNodeFilters) && self.k8sNodeFilters.exists(f, f.name == self.populateJail.k8sNodeFilterName))",message="must name an entry of spec.k8sNodeFilters",fieldPath=".populateJail.k8sNodeFilterName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.controller.volumes.jail) || (has(self.volumeSources) && self.volumeSources.exists(v, v.name == self.slurmNodes.controller.volumes.jail.volumeSourceName))",message="must name an entry of spec.volumeSources",fieldPath=".slurmNodes.controller.volumes.jail.volumeSourceName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.controller.volumes.spool) || !has(self.slurmNodes.controller.volumes.spool.volumeSourceName) || (has(self.volumeSources) && self.volumeSources.exists(v, v.name == self.slurmNodes.controller.volumes.spool.volumeSourceName))",message="must name an entry of spec.volumeSources",fieldPath=".slurmNodes.controller.volumes.spool.volumeSourceName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.worker.volumes.jail) || (has(self.volumeSources) && self.volumeSources.exists(v, v.name == self.slurmNodes.worker.volumes.jail.volumeSourceName))",message="must name an entry of spec.volumeSources",fieldPath=".slurmNodes.worker.volumes.jail.volumeSourceName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.worker.volumes.spool) || !has(self.slurmNodes.worker.volumes.spool.volumeSourceName) || (has(self.volumeSources) && self.volumeSources.exists(v, v.name == self.slurmNodes.worker.volumes.spool.volumeSourceName))",message="must name an entry of spec.volumeSources",fieldPath=".slurmNodes.worker.volumes.spool.volumeSourceName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.worker.volumes.jailSubMounts) || self.slurmNodes.worker.volumes.jailSubMounts.all(m, has(self.volumeSources) && self.volumeSources.exists(v, v.name == m.volumeSourceName))",message="every volumeSourceName must name an entry of spec.volumeSources",fieldPath=".slurmNodes.worker.volumes.jailSubMounts"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.login.volumes.jail) || (has(self.volumeSources) && self.volumeSources.exists(v, v.name == self.slurmNodes.login.volumes.jail.volumeSourceName))",message="must name an entry of spec.volumeSources",fieldPath=".slurmNodes.login.volumes.jail.volumeSourceName"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.login.volumes.jailSubMounts) || self.slurmNodes.login.volumes.jailSubMounts.all(m, has(self.volumeSources) && self.volumeSources.exists(v, v.name == m.volumeSourceName))",message="every volumeSourceName must name an entry of spec.volumeSources",fieldPath=".slurmNodes.login.volumes.jailSubMounts"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.worker.volumes.jailSubMounts) || !has(self.slurmNodes.login.volumes.jailSubMounts) || self.slurmNodes.worker.volumes.jailSubMounts.all(w, self.slurmNodes.login.volumes.jailSubMounts.all(l, l.name != w.name || l.mountPath == w.mountPath))",message="a jail sub-mount must have the same mountPath on login and worker nodes",fieldPath=".slurmNodes.login.volumes.jailSubMounts"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.worker.volumes.jailSubMounts) || !has(self.slurmNodes.login.volumes.jailSubMounts) || self.slurmNodes.worker.volumes.jailSubMounts.all(w, self.slurmNodes.login.volumes.jailSubMounts.all(l, l.volumeSourceName != w.volumeSourceName || l.mountPath == w.mountPath))",message="a volume source mounted into the jail must have the same mountPath on login and worker nodes",fieldPath=".slurmNodes.login.volumes.jailSubMounts"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmNodes.nodeSets) || self.slurmNodes.nodeSets.all(s, !has(s.k8sNodeFilterName) || (has(self.k8sNodeFilters) && self.k8sNodeFilters.exists(f, f.name == s.k8sNodeFilterName)))",message="every k8sNodeFilterName must name an entry of spec.k8sNodeFilters",fieldPath=".slurmNodes.nodeSets"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmConfig.partitions) || self.slurmConfig.partitions.all(p, !has(p.nodeSets) || p.nodeSets.all(n, n == 'worker' || (has(self.slurmNodes.nodeSets) && self.slurmNodes.nodeSets.exists(s, s.name == n))))",message="a partition's nodeSets must name worker or an entry of spec.slurmNodes.nodeSets (a set a partition names cannot be removed: take it out of the partition first)",fieldPath=".slurmConfig.partitions"
// +kubebuilder:validation:XValidation:rule="!has(self.slurmConfig.partitions) || self.slurmConfig.partitions.filter(p, has(p.default) && p.default).size() <= 1",message="at most one partition may be the default",fieldPath=".slurmConfig.partitions"
// +kubebuilder:validation:XValidation:rule="!has(self.upgrades) || !has(self.upgrades.backup) || !has(self.upgrades.backup.volumeSourceName) || (has(self.volumeSources) && self.volumeSources.exists(v, v.name == self.upgrades.backup.volumeSourceName))",message="must name an entry of spec.volumeSources",fieldPath=".upgrades.backup.volumeSourceName"
// +kubebuilder:validation:XValidation:rule="!has(self.upgrades) || !has(self.upgrades.backup) || !has(self.upgrades.backup.volumeSourceName) || !has(self.volumeSources) || !self.volumeSources.exists(v, v.name == self.upgrades.backup.volumeSourceName && has(v.emptyDir))",message="names an emptyDir volume source: a backup there is gone when the backup Job's pod ends; name a persistentVolumeClaim, nfs, csi or hostPath source",fieldPath=".upgrades.backup.volumeSourceName"
// +kubebuilder:validation:XValidation:rule="!has(self.backups) || (has(self.volumeSources) && self.volumeSources.exists(v, v.name == self.backups.volumeSourceName))",message="must name an entry of spec.volumeSources",fieldPath=".backups.volumeSourceName"
// +kubebuilder:validation:XValidation:rule="!has(self.backups) || !has(self.volumeSources) || !self.volumeSources.exists(v, v.name == self.backups.volumeSourceName && has(v.emptyDir))",message="names an emptyDir volume source: a backup there is gone when the backup Job's pod ends; name a persistentVolumeClaim, nfs, csi or hostPath source",fieldPath=".backups.volumeSourceName"
type SlurmClusterSpec struct {
	// ClusterName is the Slurm cluster name (ClusterName in slurm.conf, and the cluster's name in
	// the accounting database). It cannot be changed after creation: Slurm ties saved state and
	// accounting records to it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_-]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterName is immutable"
	ClusterName string `json:"clusterName"`

	// K8sNodeFilters are named sets of Kubernetes nodes (for example "gpu" and "no-gpu"). Each
	// component picks one through its k8sNodeFilterName. Both filters may select the same nodes.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	K8sNodeFilters []K8sNodeFilter `json:"k8sNodeFilters,omitempty"`

	// VolumeSources are named volumes (usually ReadWriteMany PersistentVolumeClaims) that the
	// components mount through a volumeSourceName: the jail, the controller spool, jail sub-mounts.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=24
	// +optional
	VolumeSources []VolumeSource `json:"volumeSources,omitempty"`

	// PopulateJail configures the one-time Job that fills the jail volume with an OS root.
	// +optional
	PopulateJail *PopulateJail `json:"populateJail,omitempty"`

	// PeriodicChecks configures health checks that run on every worker and drain a broken node.
	// +optional
	PeriodicChecks *PeriodicChecks `json:"periodicChecks,omitempty"`

	// ActiveChecks are checks the operator runs as Slurm jobs of its own on idle workers, on a
	// schedule and after a worker returns from a drain; a failure drains the worker with the
	// check's output, comments it or is only reported (docs/health.md#active-checks).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ActiveChecks []ActiveCheck `json:"activeChecks,omitempty"`

	// SlurmConfig holds the Slurm settings an admin may change: partitions, common parameters,
	// cgroup.conf keys and extra slurm.conf lines.
	// +kubebuilder:default={}
	// +optional
	SlurmConfig SlurmConfig `json:"slurmConfig,omitempty"`

	// Images are the container images of the components.
	// +kubebuilder:default={}
	// +optional
	Images Images `json:"images,omitempty"`

	// Docker runs a Docker daemon on every worker for the docker CLI of the jail, when enabled
	// (docs/containers.md). Off by default: membership of the docker group is root on the
	// Kubernetes node. Rootless Podman needs no daemon and is always there, on login nodes too.
	// +kubebuilder:default={}
	// +optional
	Docker Docker `json:"docker,omitempty"`

	// NetworkPolicies renders a NetworkPolicy for each component, so that only the pods that must
	// talk to a port may (docs/security.md#network-policies), and keeps login sessions and jobs
	// away from the cloud's metadata address. On by default; they take effect where the
	// Kubernetes cluster's network enforces NetworkPolicies.
	// +kubebuilder:default={}
	// +optional
	NetworkPolicies NetworkPolicies `json:"networkPolicies,omitempty"`

	// Upgrades configures what happens before the images change Slurm's release: the backup
	// of the accounting database and the controller's state (docs/upgrades.md).
	// +kubebuilder:default={}
	// +optional
	Upgrades Upgrades `json:"upgrades,omitempty"`

	// Backups takes scheduled backups of the accounting database and the controller's state
	// to a volume, keeping the newest few (docs/backup.md). Unset: no scheduled backups.
	// +optional
	Backups *Backups `json:"backups,omitempty"`

	// Identity says where user and group names come from: the site's directory through SSSD
	// (docs/identity.md). Unset: the jail's /etc/passwd and /etc/group only.
	// +optional
	Identity *Identity `json:"identity,omitempty"`

	// SlurmNodes sets the count and configuration of each kind of Slurm node.
	SlurmNodes SlurmNodes `json:"slurmNodes"`
}

// Docker configures the Docker daemon of each worker. Its containers run outside Slurm's limits
// (run Docker jobs with -N and --exclusive); rootless Podman, in the jail too, runs containers
// inside the job step's cgroup.
type Docker struct {
	// Enabled runs dockerd in every worker pod, its data on the node (an emptyDir, never the
	// shared jail), its socket at /run/docker.sock in the jail. Off by default: dockerd is
	// privileged, and whoever may use it (the jail's docker group, adduser USER docker) can
	// start a privileged container and so is root on the worker's Kubernetes node. Login nodes
	// never run dockerd (they face users, behind a public address): build images there with
	// rootless Podman.
	// +kubebuilder:default=false
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// DataSizeLimit bounds each node's Docker data (images, containers, build cache). The pod is
	// evicted when it is exceeded.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be a positive size, for example 200Gi"
	// +optional
	DataSizeLimit *resource.Quantity `json:"dataSizeLimit,omitempty"`

	// RegistryMirrors are dockerd's --registry-mirror URLs, for clusters that have a mirror of
	// Docker Hub.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^https?://[^\s,]+$`
	// +optional
	RegistryMirrors []string `json:"registryMirrors,omitempty"`
}

// DockerEnabled reports whether the cluster's workers run dockerd (spec.docker.enabled, off
// when unset).
func (sc *SlurmCluster) DockerEnabled() bool {
	return sc.Spec.Docker.Enabled != nil && *sc.Spec.Docker.Enabled
}

// NetworkPolicies configures the NetworkPolicies the operator renders for a cluster.
type NetworkPolicies struct {
	// Enabled renders the policies (true, the default). false leaves every port of the cluster
	// open to every pod, as Kubernetes does without policies: for clusters whose network enforces
	// none, or whose admins write their own.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// BlockedEgressCIDRs are addresses that login sessions and jobs (the login and worker pods)
	// may not reach: by default the cloud metadata service (169.254.169.254, and AWS's
	// fd00:ec2::254), which hands out the node's cloud credentials. Each is an IPv4 or IPv6
	// CIDR narrower than the whole family (/0). An empty list blocks nothing.
	// +kubebuilder:default={"169.254.169.254/32","fd00:ec2::254/128"}
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c) && cidr(c).prefixLength() > 0)",message="each entry must be an IPv4 or IPv6 CIDR with a prefix length above 0, for example 169.254.169.254/32"
	// +listType=set
	// +optional
	BlockedEgressCIDRs []string `json:"blockedEgressCIDRs,omitempty"`
}

// DefaultBlockedEgressCIDRs are the cloud metadata addresses: the default of
// spec.networkPolicies.blockedEgressCIDRs, which the CRD sets too.
var DefaultBlockedEgressCIDRs = []string{"169.254.169.254/32", "fd00:ec2::254/128"}

// NetworkPoliciesEnabled reports whether the operator renders the cluster's NetworkPolicies
// (spec.networkPolicies.enabled, on when unset).
func (sc *SlurmCluster) NetworkPoliciesEnabled() bool {
	return sc.Spec.NetworkPolicies.Enabled == nil || *sc.Spec.NetworkPolicies.Enabled
}

// K8sNodeFilter is a named choice of Kubernetes nodes.
type K8sNodeFilter struct {
	// Name is how components refer to this filter (k8sNodeFilterName).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// NodeSelector is a map of node labels that a node must carry: keys are label keys (an
	// optional DNS prefix and a slash, then a name), values label values (at most 63
	// characters of letters, digits, '-', '_' and '.', or empty).
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="every key must be a label key: an optional DNS prefix and a slash, then a name of letters, digits, '-', '_' and '.'"
	// +optional
	NodeSelector map[string]LabelValue `json:"nodeSelector,omitempty"`

	// Affinity holds node affinity rules for the pods placed by this filter: Kubernetes'
	// nodeAffinity, checked at admission as Kubernetes checks a pod's.
	// +optional
	Affinity *NodeFilterAffinity `json:"affinity,omitempty"`

	// Tolerations let the pods run on tainted nodes (for example GPU nodes tainted
	// nvidia.com/gpu=present:NoSchedule), checked at admission as Kubernetes checks a pod's.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Tolerations []Toleration `json:"tolerations,omitempty"`
}

// PopulateJail configures the Job that fills an empty jail with an OS root.
type PopulateJail struct {
	// Image holds the jail's root file system; the Job copies it into the jail volume.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Image string `json:"image,omitempty"`

	// K8sNodeFilterName picks the nodes the populate Job may run on.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	K8sNodeFilterName string `json:"k8sNodeFilterName,omitempty"`

	// Overwrite, when true, repopulates a jail that this operator populated before (it carries
	// the operator's marker). This destroys what users installed in the jail. Leave it false
	// (the default) except for a deliberate rebuild. A jail that holds data without the marker
	// (filled by someone else) is never overwritten.
	// +kubebuilder:default=false
	// +optional
	Overwrite bool `json:"overwrite,omitempty"`
}

// HealthCheck names one check of the periodic health checks.
// +kubebuilder:validation:Enum=GPUCount;NvidiaSMI;JailMounted;JailWritable
type HealthCheck string

const (
	// HealthCheckGPUCount verifies that the node sees as many GPUs as Slurm expects.
	HealthCheckGPUCount HealthCheck = "GPUCount"
	// HealthCheckNvidiaSMI verifies that nvidia-smi answers without error.
	HealthCheckNvidiaSMI HealthCheck = "NvidiaSMI"
	// HealthCheckJailMounted verifies that the jail is mounted and readable.
	HealthCheckJailMounted HealthCheck = "JailMounted"
	// HealthCheckJailWritable verifies that the jail takes a small write (a file of the node's
	// own, within 10 seconds: a hung network file system fails it) and has at least
	// jailMinFreeSpace free. A jail that is read-only, full or hung keeps taking jobs that fail.
	HealthCheckJailWritable HealthCheck = "JailWritable"
)

// HealthAction is what happens to a node whose check fails.
// +kubebuilder:validation:Enum=Drain;Report
type HealthAction string

const (
	// HealthActionDrain drains the node in Slurm with a reason owned by the operator, and returns
	// it to service when the checks pass again.
	HealthActionDrain HealthAction = "Drain"
	// HealthActionReport only records the failure (in the slurmd log and an event).
	HealthActionReport HealthAction = "Report"
)

// PeriodicChecks configures health checks that slurmd runs on every worker (Slurm's
// HealthCheckProgram).
type PeriodicChecks struct {
	// Enabled turns the checks on.
	// +kubebuilder:default=true
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// IntervalSeconds is how often each worker runs the checks (HealthCheckInterval).
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=300
	// +optional
	IntervalSeconds int32 `json:"intervalSeconds,omitempty"`

	// Checks lists what to check. Empty means every check that fits the node (GPU checks only on
	// GPU workers).
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Checks []HealthCheck `json:"checks,omitempty"`

	// Action is what happens when a check fails: Drain (the default) or Report.
	// +kubebuilder:default=Drain
	// +optional
	Action HealthAction `json:"action,omitempty"`

	// JailMinFreeSpace is the free space the JailWritable check wants in the jail (the shared
	// root every job writes to); less drains the node.
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be a positive size, for example 1Gi"
	// +optional
	JailMinFreeSpace *resource.Quantity `json:"jailMinFreeSpace,omitempty"`
}

// Images are the container images of the components. Each has a default that matches the
// operator's release. The Slurm a pod runs is its image's (the jail holds none that runs), and
// the tags carry Slurm's release (24.11): the operator refuses, rolling nothing, an accounting
// image older than the controller's, a controller older than the workers' or login's, and a
// downgrade or a jump over more than three releases from what runs (docs/upgrades.md).
type Images struct {
	// Controller runs slurmctld.
	// +kubebuilder:default="slurm-k8s/slurmctld:24.11"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Controller string `json:"controller,omitempty"`

	// Worker runs slurmd inside the jail; its Slurm (slurmd, the commands, the plugins) is shown
	// in the jail over the jail's own.
	// +kubebuilder:default="slurm-k8s/slurmd:24.11"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Worker string `json:"worker,omitempty"`

	// Login runs sshd inside the jail; the users' Slurm commands are this image's.
	// +kubebuilder:default="slurm-k8s/login:24.11"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Login string `json:"login,omitempty"`

	// Accounting runs slurmdbd.
	// +kubebuilder:default="slurm-k8s/slurmdbd:24.11"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Accounting string `json:"accounting,omitempty"`

	// Munge runs munged beside every Slurm daemon.
	// +kubebuilder:default="slurm-k8s/munge:24.11"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Munge string `json:"munge,omitempty"`

	// Exporter runs the Prometheus exporter.
	// +kubebuilder:default="slurm-k8s/exporter:24.11"
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +optional
	Exporter string `json:"exporter,omitempty"`

	// PullPolicy applies to every image above.
	// +kubebuilder:default=IfNotPresent
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	PullPolicy string `json:"pullPolicy,omitempty"`

	// PullSecrets name Secrets of the cluster's namespace that hold credentials for the
	// images' registry (type kubernetes.io/dockerconfigjson, as kubectl create secret
	// docker-registry makes): every pod of the cluster lists them as imagePullSecrets.
	// Changing them replaces the pods (their template changes).
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=name
	// +optional
	PullSecrets []SecretName `json:"pullSecrets,omitempty"`
}

// SlurmClusterStatus is what the operator observed the last time it reconciled.
type SlurmClusterStatus struct {
	// ObservedGeneration is the spec generation that the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Available (the cluster takes jobs), ControllerAvailable, WorkersAvailable,
	// LoginAvailable, AccountingAvailable, JailPopulated, and Degraded when something needs care.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Workers counts the worker nodes, as Kubernetes and as Slurm see them.
	// +optional
	Workers WorkerStatus `json:"workers,omitempty"`

	// NodeSets counts the pods of each node set (spec.slurmNodes.nodeSets, and sets that left
	// the spec while their nodes drain); workers counts spec.slurmNodes.worker's.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	NodeSets []NodeSetStatus `json:"nodeSets,omitempty"`

	// LoginEndpoint is the address users ssh to (the login Service's load balancer address, or
	// its cluster address when it has none yet).
	// +optional
	LoginEndpoint string `json:"loginEndpoint,omitempty"`

	// GPU is the GPU shape of each worker, as rendered into Slurm's gres.
	// +optional
	GPU *GPUShape `json:"gpu,omitempty"`

	// ActiveChecks is what the last runs of each of spec.activeChecks found.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ActiveChecks []ActiveCheckStatus `json:"activeChecks,omitempty"`
}

// WorkerStatus counts worker nodes.
type WorkerStatus struct {
	// Desired is spec.slurmNodes.worker.size.
	// +optional
	Desired int32 `json:"desired,omitempty"`
	// Replicas is how many worker pods exist.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// Ready is how many worker pods are ready.
	// +optional
	Ready int32 `json:"ready,omitempty"`
	// Summary is "ready/desired", for kubectl get.
	// +optional
	Summary string `json:"summary,omitempty"`
	// Idle is how many workers Slurm reports idle.
	// +optional
	Idle int32 `json:"idle,omitempty"`
	// Allocated is how many workers Slurm reports running jobs (allocated or mixed).
	// +optional
	Allocated int32 `json:"allocated,omitempty"`
	// Drained is how many workers Slurm reports drained or draining.
	// +optional
	Drained int32 `json:"drained,omitempty"`
	// OutOfService are the workers Slurm holds out of service (drained, draining, down or
	// failed), each with its reason (a health check's output, the Kubernetes node's condition,
	// an admin's words), who set it and since when; the first 32 in Slurm's order (the exporter's
	// slurm_node_reason_since_timestamp_seconds has them all).
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	OutOfService []NodeOutOfService `json:"outOfService,omitempty"`
	// Selector selects the worker pods (for the scale subresource, HPA and KEDA).
	// +optional
	Selector string `json:"selector,omitempty"`
}

// NodeOutOfService is a Slurm node held out of service, and why.
type NodeOutOfService struct {
	// Name is the Slurm node name (worker-3).
	Name string `json:"name"`
	// State is its state as sinfo names it (drained, draining, down, fail).
	State string `json:"state"`
	// Reason is the reason Slurm keeps for it (its first 200 characters).
	// +optional
	Reason string `json:"reason,omitempty"`
	// SetBy is who set the reason: operator (for its drains), admin, or empty (Slurm's own,
	// for a node that stopped answering).
	// +optional
	SetBy string `json:"setBy,omitempty"`
	// Since is when the reason was set.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// NextCheck is, for a worker an active check drained, when that check runs on it again.
	// +optional
	NextCheck *metav1.Time `json:"nextCheck,omitempty"`
}

// GPUShape is the GPU configuration of each worker.
type GPUShape struct {
	// PerWorker is the number of GPUs of each worker.
	PerWorker int32 `json:"perWorker"`
	// Type is the gres type rendered in Slurm (for example h100); empty when untyped.
	// +optional
	Type string `json:"type,omitempty"`
	// Product is the GPU product the node labels name (for example NVIDIA-H100-80GB-HBM3).
	// +optional
	Product string `json:"product,omitempty"`
	// Source says where the shape came from: Spec (slurmNodes.worker.gpu) or NodeLabels.
	// +optional
	Source string `json:"source,omitempty"`
}

// SlurmCluster is a complete Slurm cluster: slurmctld, GPU workers, SSH login nodes,
// accounting, and the shared-root jail every node and job runs in.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.slurmNodes.worker.size,statuspath=.status.workers.replicas,selectorpath=.status.workers.selector
// +kubebuilder:resource:shortName=slurm,categories=slurm
// +kubebuilder:printcolumn:name="Workers",type=string,JSONPath=`.status.workers.summary`,description="Ready/desired worker nodes"
// +kubebuilder:printcolumn:name="GPUs",type=integer,JSONPath=`.status.gpu.perWorker`,description="GPUs per worker"
// +kubebuilder:printcolumn:name="Login",type=string,JSONPath=`.status.loginEndpoint`,description="Address to ssh to"
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40",message="metadata.name must be at most 40 characters: it prefixes the names of the cluster's objects"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (lowercase letters, digits and '-', starting with a letter): it prefixes the names of the cluster's Services"
type SlurmCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired cluster.
	Spec SlurmClusterSpec `json:"spec"`
	// Status is the observed cluster.
	// +optional
	Status SlurmClusterStatus `json:"status,omitempty"`
}

// SlurmClusterList is a list of SlurmCluster.
//
// +kubebuilder:object:root=true
type SlurmClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SlurmCluster `json:"items"`
}
