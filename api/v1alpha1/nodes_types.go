package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// SlurmNodes sets the count and configuration of each kind of Slurm node.
type SlurmNodes struct {
	// Controller runs slurmctld (and a backup slurmctld when size is 2).
	// +kubebuilder:default={}
	// +optional
	Controller Controller `json:"controller,omitempty"`

	// Worker runs slurmd: the nodes jobs run on, named worker-0 … worker-(size-1).
	Worker Worker `json:"worker"`

	// NodeSets are further groups of workers, each with its own size, Kubernetes nodes, GPUs,
	// resources, features and image (mixed hardware: H100 and A100 nodes, CPU-only nodes).
	// Each takes what it leaves unset from worker. Removing a set drains its nodes first, as a
	// scale-down to 0 does; a set a partition names cannot be removed. At most 8 sets.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	NodeSets []NodeSet `json:"nodeSets,omitempty"`

	// Login runs sshd: the nodes users log in to, named login-0 … login-(size-1).
	Login Login `json:"login"`

	// Accounting runs slurmdbd and its database.
	// +kubebuilder:default={}
	// +optional
	Accounting Accounting `json:"accounting,omitempty"`

	// Exporter runs a Prometheus exporter for Slurm metrics.
	// +kubebuilder:default={}
	// +optional
	Exporter Exporter `json:"exporter,omitempty"`
}

// Controller configures slurmctld.
// +kubebuilder:validation:XValidation:rule="!has(self.size) || self.size == 1 || (has(self.volumes) && has(self.volumes.spool) && has(self.volumes.spool.volumeSourceName))",message="size 2 (a backup slurmctld) needs one spool both controllers share: set volumes.spool.volumeSourceName to a ReadWriteMany volume source (a volumeClaimTemplateSpec gives each pod a claim of its own, and the backup would take over with no state)",fieldPath=".size"
type Controller struct {
	// Size is 1, or 2 for a backup slurmctld that takes over when the first fails. A backup
	// needs the StateSaveLocation the first wrote: the spool must be one ReadWriteMany volume
	// source both share (volumes.spool.volumeSourceName), not a claim template (a claim per pod).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2
	// +kubebuilder:default=1
	// +optional
	Size int32 `json:"size,omitempty"`

	// K8sNodeFilterName picks the Kubernetes nodes slurmctld runs on.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	K8sNodeFilterName string `json:"k8sNodeFilterName,omitempty"`

	// Resources of the slurmctld container.
	// +optional
	Resources ContainerResources `json:"resources,omitempty"`

	// Volumes of the controller.
	// +kubebuilder:default={}
	// +optional
	Volumes ControllerVolumes `json:"volumes,omitempty"`
}

// ControllerVolumes are the volumes of the controller.
type ControllerVolumes struct {
	// Spool holds slurmctld's saved state (StateSaveLocation). When unset, each controller pod
	// gets a 10Gi ReadWriteOnce claim of the default storage class.
	// +optional
	Spool *SpoolVolume `json:"spool,omitempty"`

	// Jail is the shared root as the controller sees it, read-only: slurmctld reads the jail's
	// users and groups (users are added in the jail, with adduser on a login node). Unset: the
	// workers' jail.
	// +optional
	Jail *JailVolume `json:"jail,omitempty"`
}

// Worker configures the slurmd nodes.
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !self.autoscaling.enabled || (self.size >= (has(self.autoscaling.minSize) ? self.autoscaling.minSize : 0) && self.size <= self.autoscaling.maxSize)",message="size must be within autoscaling's minSize and maxSize while autoscaling is on: it is the size the set keeps when autoscaling is turned off",fieldPath=".size"
type Worker struct {
	// Size is the number of worker nodes, named worker-0 … worker-(size-1). Change it with
	// kubectl edit or kubectl scale.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4096
	// +kubebuilder:default=1
	// +optional
	Size int32 `json:"size"`

	// Autoscaling lets Slurm size the set between minSize and maxSize: nodes are powered up
	// (their pods made) when jobs wait for them and powered down (their pods removed) when idle.
	// Node sets have their own.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`

	// K8sNodeFilterName picks the Kubernetes nodes workers run on (usually the GPU nodes).
	// +kubebuilder:validation:MaxLength=63
	// +optional
	K8sNodeFilterName string `json:"k8sNodeFilterName,omitempty"`

	// GPU is the number of GPUs of each worker. When unset, it is found from the NVIDIA GPU
	// Operator's labels (nvidia.com/gpu.count, nvidia.com/gpu.product, MIG labels) on the nodes
	// the worker filter selects, with the gres type from the product (h100, a100, …).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	GPU *int32 `json:"gpu,omitempty"`

	// ScaleDownGracePeriodSeconds bounds how long a scale-down waits for the jobs on the
	// leaving workers. When it has passed, the workers are removed and their jobs are killed.
	// Unset (the default): wait for the jobs however long they run.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	// +optional
	ScaleDownGracePeriodSeconds *int32 `json:"scaleDownGracePeriodSeconds,omitempty"`

	// UpdateStrategy paces the replacement of worker pods after a change of their template (an
	// image, resources): each is drained in Slurm first and replaced once idle.
	// +optional
	UpdateStrategy WorkerUpdateStrategy `json:"updateStrategy,omitempty"`

	// DrainOnNodeConditions are Kubernetes node condition types (Node Problem Detector's
	// KernelDeadlock or ReadonlyFilesystem, a GPU health agent's) that mean a node should run no
	// jobs: while one is True on a worker's node, the worker is drained in Slurm with the
	// condition's type, reason and message, and the drain is lifted when every such condition is
	// False again, as for a cordoned or not ready node. An admin's drain is never lifted. Ready
	// is followed already.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=316
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!self.exists(c, c == 'Ready')",message="Ready is followed already: a worker on a node that is not ready is drained"
	// +listType=set
	// +optional
	DrainOnNodeConditions []string `json:"drainOnNodeConditions,omitempty"`

	// GresAutoDetect is gres.conf's AutoDetect: off (the default) lists the device files
	// /dev/nvidia0…N; nvidia lets slurmd find the GPUs itself from the driver's device files, with
	// no library (it sees no MIG devices); nvml asks NVML (the driver's library), which also
	// finds MIG devices and NVLinks, through the gpu/nvml plugin the worker image carries (its
	// amd64 image only: Debian builds the plugin for amd64, so on arm64 nodes use nvidia or off).
	// MIG shapes always use nvml.
	// +kubebuilder:validation:Enum=off;nvidia;nvml
	// +kubebuilder:default=off
	// +optional
	GresAutoDetect GresAutoDetect `json:"gresAutoDetect,omitempty"`

	// PodAnnotations go on every worker pod, for example k8s.v1.cni.cncf.io/networks to attach
	// the RDMA network of the NVIDIA network operator (docs/networking.md). Changing them
	// replaces the workers one drained node at a time. Keys under slurm.hpc.dev/ are the
	// operator's.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 8192)",message="every value must be at most 8 KiB: Kubernetes takes at most 256 KiB of annotations on a pod"
	// +kubebuilder:validation:XValidation:rule="self.map(k, size(k) + size(self[k])).sum() <= 131072",message="the annotations must be at most 128 KiB in all (keys and values): Kubernetes takes at most 256 KiB of annotations on a pod, the operator's own included"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('slurm.hpc.dev/'))",message="annotations under slurm.hpc.dev/ are the operator's own"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="every key must be an annotation key: an optional DNS prefix and a slash, then a name of letters, digits, '-', '_' and '.'"
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// Features are Slurm node features of every worker (the node line's Features=), which jobs
	// ask for with --constraint. Node sets have their own.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_.]+$`
	// +listType=set
	// +optional
	Features []string `json:"features,omitempty"`

	// FeaturesFromNodeLabels are label keys of the Kubernetes nodes workers run on whose values
	// become Slurm features of the worker on that node (a rack, a NIC model, a zone), so that
	// jobs ask for them with --constraint. A worker whose pod is not on a node yet, or whose
	// node lacks the label, has the set's features alone; a worker that moves to another node
	// takes that node's. Only label values that are valid feature names (letters, digits, '_',
	// '.', '-') are taken. Node sets take these unless they set their own.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=316
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +listType=set
	// +optional
	FeaturesFromNodeLabels []string `json:"featuresFromNodeLabels,omitempty"`

	// Resources of the slurmd container. CPUs and memory of the Slurm node follow from them:
	// CPUs from the CPU limit (or request), RealMemory from the memory limit (or request) less
	// 5% headroom (at least 1 GiB, at most 16 GiB) for slurmd, sshd and the OS.
	// +optional
	Resources ContainerResources `json:"resources,omitempty"`

	// CPUTopology is the CPUs of a worker's host as slurmd finds them: sockets, cores per
	// socket, threads per core. With it, the node line describes the host (Sockets,
	// CoresPerSocket, ThreadsPerCore, CPUs = their product), so that task binding and GPU-CPU
	// affinity follow the NUMA layout; CPUs the worker's CPU limit leaves out are reserved for the
	// system (CoreSpecCount), and with gresAutoDetect off each socket's GPUs are bound to its
	// cores (gres.conf Cores=; NVML finds that itself). Unset: CPUs alone, from the CPU limit.
	// +optional
	CPUTopology *CPUTopology `json:"cpuTopology,omitempty"`

	// SharedMemorySize sizes /dev/shm of each worker, a memory-backed volume (NCCL and PyTorch
	// DataLoader workers need far more than a container runtime's 64 MiB). Its pages count
	// against the worker's memory limit. Unset: as large as the pod's memory limit allows.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="must be a positive size, for example 64Gi"
	// +optional
	SharedMemorySize *resource.Quantity `json:"sharedMemorySize,omitempty"`

	// SSH says who may log in to a worker with ssh. By default a user may only while they have a
	// job on that worker, and their session joins that job (pam_slurm_adopt): it is confined to the
	// job's CPUs, memory and GPUs and ends with the job. Root, and members of adminGroups, may
	// always log in, outside any job.
	// +optional
	SSH WorkerSSH `json:"ssh,omitempty"`

	// Volumes of the workers.
	Volumes WorkerVolumes `json:"volumes"`
}

// WorkerSSH says who may ssh to a worker.
type WorkerSSH struct {
	// RequireJob refuses an ssh session on a worker to a user with no job there (true, the
	// default). false lets every user in, as a plain host would: a session of a user with a job
	// there still joins it, the others run outside Slurm and may use every GPU of the worker.
	// +optional
	RequireJob *bool `json:"requireJob,omitempty"`

	// AdminGroups are groups of the jail (or of the site's directory) whose members may ssh to
	// every worker without a job, as root may; their sessions run outside Slurm.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:items:Pattern=`^[a-z_][a-z0-9_.-]*$`
	// +listType=set
	// +optional
	AdminGroups []string `json:"adminGroups,omitempty"`
}

// SSHRequiresJob says whether a user needs a job on a worker to ssh to it (the default).
func (w *Worker) SSHRequiresJob() bool {
	return w.SSH.RequireJob == nil || *w.SSH.RequireJob
}

// GresAutoDetect is the value of gres.conf's AutoDetect.
type GresAutoDetect string

// The values of GresAutoDetect.
const (
	GresAutoDetectOff    GresAutoDetect = "off"
	GresAutoDetectNVIDIA GresAutoDetect = "nvidia"
	GresAutoDetectNVML   GresAutoDetect = "nvml"
)

// WorkerVolumes are the volumes of each worker.
type WorkerVolumes struct {
	// Spool holds slurmd's node-local state. When unset, it is an emptyDir.
	// +optional
	Spool *SpoolVolume `json:"spool,omitempty"`

	// Jail is the shared root every job runs in.
	Jail JailVolume `json:"jail"`

	// JailSubMounts are volumes mounted inside the jail, at the same path on every node.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	JailSubMounts []JailSubMount `json:"jailSubMounts,omitempty"`
}

// Login configures the SSH login nodes.
type Login struct {
	// Size is the number of login nodes, named login-0 … login-(size-1).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	// +kubebuilder:default=1
	// +optional
	Size int32 `json:"size"`

	// K8sNodeFilterName picks the Kubernetes nodes login pods run on.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	K8sNodeFilterName string `json:"k8sNodeFilterName,omitempty"`

	// Sshd configures the SSH daemon.
	// +kubebuilder:default={}
	// +optional
	Sshd Sshd `json:"sshd,omitempty"`

	// SSHRootPublicKeys are the public keys allowed to log in as root. Changing them does not
	// restart the login pods.
	// At most 100 keys of at most 8 KiB each, so that they fit the 1 MiB of a ConfigMap.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +optional
	SSHRootPublicKeys []SSHPublicKey `json:"sshRootPublicKeys,omitempty"`

	// Service exposes sshd outside the cluster.
	// +kubebuilder:default={}
	// +optional
	Service LoginService `json:"service,omitempty"`

	// PodAnnotations go on every login pod (a secondary network, a service mesh's opt-out).
	// Changing them replaces the login pods. Keys under slurm.hpc.dev/ are the operator's.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 8192)",message="every value must be at most 8 KiB: Kubernetes takes at most 256 KiB of annotations on a pod"
	// +kubebuilder:validation:XValidation:rule="self.map(k, size(k) + size(self[k])).sum() <= 131072",message="the annotations must be at most 128 KiB in all (keys and values): Kubernetes takes at most 256 KiB of annotations on a pod, the operator's own included"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('slurm.hpc.dev/'))",message="annotations under slurm.hpc.dev/ are the operator's own"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="every key must be an annotation key: an optional DNS prefix and a slash, then a name of letters, digits, '-', '_' and '.'"
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// Resources of the sshd container.
	// +optional
	Resources ContainerResources `json:"resources,omitempty"`

	// StopNoticeSeconds is how long a login pod that is stopped (an update of its image or
	// resources, an eviction, a node drain) keeps its ssh sessions after telling them: each
	// session's terminal is told the node stops and when, and the pod stops once the time is up
	// or the last session ended. 0 stops at once. Unset: 60.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	StopNoticeSeconds *int32 `json:"stopNoticeSeconds,omitempty"`

	// Volumes of the login nodes.
	Volumes LoginVolumes `json:"volumes"`
}

// SSHPublicKey is one line of an authorized_keys file: type, key, optional comment.
// +kubebuilder:validation:MaxLength=8192
// +kubebuilder:validation:Pattern=`^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256|ecdsa-sha2-nistp384|ecdsa-sha2-nistp521|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com) [A-Za-z0-9+/]+={0,2}( [^\r\n]*)?$`
type SSHPublicKey string

// Sshd configures the SSH daemon of the login nodes.
type Sshd struct {
	// Port sshd listens on, inside the pod and on the Service.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=22
	// +optional
	Port int32 `json:"port,omitempty"`
}

// LoginService configures the Service in front of the login nodes.
type LoginService struct {
	// Type of the Service: LoadBalancer (the default, a public address), NodePort or ClusterIP
	// (reach it with kubectl port-forward).
	// +kubebuilder:validation:Enum=LoadBalancer;NodePort;ClusterIP
	// +kubebuilder:default=LoadBalancer
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// Annotations on the Service, for example to ask the cloud for a private load balancer.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="every key must be an annotation key: an optional DNS prefix and a slash, then a name of letters, digits, '-', '_' and '.'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 8192)",message="every value must be at most 8 KiB: Kubernetes takes at most 256 KiB of annotations on an object"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// LoadBalancerSourceRanges limits which client addresses may connect (CIDRs).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="isCIDR(self)",message="must be a CIDR such as 203.0.113.0/24"
	// +optional
	LoadBalancerSourceRanges []string `json:"loadBalancerSourceRanges,omitempty"`
}

// LoginVolumes are the volumes of each login node.
type LoginVolumes struct {
	// Jail is the shared root users work in.
	Jail JailVolume `json:"jail"`

	// JailSubMounts are volumes mounted inside the jail; a sub-mount shared with the workers
	// must have the same mountPath.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	JailSubMounts []JailSubMount `json:"jailSubMounts,omitempty"`
}

// Accounting configures slurmdbd and its database.
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || !self.enabled || ((has(self.mariadbOperator) && self.mariadbOperator.enabled) ? 1 : 0) + (has(self.externalDB) ? 1 : 0) == 1",message="when accounting is enabled, set exactly one database: mariadbOperator.enabled or externalDB"
// +kubebuilder:validation:XValidation:rule="!has(self.enforce) || size(self.enforce) == 0 || (has(self.enabled) && self.enabled)",message="enforce needs accounting: set enabled (slurmctld enforces what slurmdbd records)",fieldPath=".enforce"
type Accounting struct {
	// Enabled runs slurmdbd, so that sacct and sreport work.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// K8sNodeFilterName picks the Kubernetes nodes slurmdbd (and its database) run on.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	K8sNodeFilterName string `json:"k8sNodeFilterName,omitempty"`

	// Resources of the slurmdbd container.
	// +optional
	Resources ContainerResources `json:"resources,omitempty"`

	// MariadbOperator creates the database with mariadb-operator (which must be installed).
	// +optional
	MariadbOperator *MariadbOperator `json:"mariadbOperator,omitempty"`

	// ExternalDB points slurmdbd at an existing MySQL or MariaDB server.
	// +optional
	ExternalDB *ExternalDB `json:"externalDB,omitempty"`

	// Enforce is slurm.conf's AccountingStorageEnforce: what slurmctld holds jobs to.
	// associations: only users with an association (sacctmgr add user NAME account=ACCOUNT)
	// may run jobs, so every new user needs one (docs/accounting.md); limits: the limits set on
	// associations (GrpTRES, MaxJobs, …), and implies associations; qos: a job's QOS must be
	// one its association may use, and the QOS's limits hold; safe: a job starts only when it
	// can finish within the limits of usage; wckeys: jobs need a valid workload key. Unset: no
	// enforcement, and limits set with sacctmgr are recorded but not held.
	// +kubebuilder:validation:MaxItems=5
	// +listType=set
	// +optional
	Enforce []AccountingEnforce `json:"enforce,omitempty"`
}

// AccountingEnforce is one value of AccountingStorageEnforce.
// +kubebuilder:validation:Enum=associations;limits;qos;safe;wckeys
type AccountingEnforce string

// MariadbOperator configures the MariaDB that mariadb-operator runs for accounting.
type MariadbOperator struct {
	// Enabled creates MariaDB, Database, User and Grant objects of mariadb-operator.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Storage of the MariaDB server.
	// +optional
	Storage MariadbStorage `json:"storage,omitempty"`

	// Resources of the MariaDB container.
	// +optional
	Resources ContainerResources `json:"resources,omitempty"`
}

// MariadbStorage is the storage of the MariaDB server.
type MariadbStorage struct {
	// VolumeClaimTemplate is the claim of the MariaDB data volume.
	// +optional
	VolumeClaimTemplate *corev1.PersistentVolumeClaimSpec `json:"volumeClaimTemplate,omitempty"`
}

// ExternalDB is an existing MySQL or MariaDB server for slurmdbd.
type ExternalDB struct {
	// Host name or address of the server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.:\[\]-]+$`
	Host string `json:"host"`

	// Port of the server.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=3306
	// +optional
	Port int32 `json:"port,omitempty"`

	// User slurmdbd logs in as.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	User string `json:"user"`

	// Database name (StorageLoc).
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_]+$`
	// +kubebuilder:default=slurm_acct_db
	// +optional
	Database string `json:"database,omitempty"`

	// PasswordSecretKeyRef is the Secret key that holds the user's password. The Secret, in the
	// cluster's namespace, must carry the label slurm.hpc.dev/allow-reference=true: the operator
	// reads no Secret that did not opt in.
	// +kubebuilder:validation:XValidation:rule="has(self.name) && size(self.name) <= 253 && self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must name a Secret: a DNS name of lowercase letters, digits, '-' and '.'",fieldPath=".name"
	// +kubebuilder:validation:XValidation:rule="size(self.key) <= 253 && self.key.matches('^[-._a-zA-Z0-9]+$')",message="must be a Secret key: letters, digits, '-', '_' and '.'",fieldPath=".key"
	PasswordSecretKeyRef corev1.SecretKeySelector `json:"passwordSecretKeyRef"`
}

// Exporter configures the Prometheus exporter of Slurm metrics (nodes, jobs, scheduler
// statistics, controller and accounting health; docs/observability.md lists them). It reads
// slurmctld through slurmrestd with a token signed by the cluster's JWT key.
type Exporter struct {
	// Enabled runs the exporter (and a ServiceMonitor when the Prometheus operator is installed).
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Size is the number of exporter replicas.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4
	// +kubebuilder:default=1
	// +optional
	Size int32 `json:"size,omitempty"`

	// K8sNodeFilterName picks the Kubernetes nodes the exporter runs on.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	K8sNodeFilterName string `json:"k8sNodeFilterName,omitempty"`

	// Resources of the exporter container.
	// +optional
	Resources ContainerResources `json:"resources,omitempty"`

	// PerUserMetrics exports jobs and RPCs per user (the slurm_user_* metrics: one series per
	// user, account, partition and job state). Turn it off on clusters with many users; jobs are
	// still counted per account.
	// +kubebuilder:default=true
	// +optional
	PerUserMetrics *bool `json:"perUserMetrics,omitempty"`
}

// CPUTopology is a host's CPU layout: for a dual-socket H100 host, 2 sockets of 56 cores with 2
// threads each (224 CPUs).
type CPUTopology struct {
	// Sockets per host.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Sockets int32 `json:"sockets"`
	// CoresPerSocket is the physical cores of each socket.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=512
	CoresPerSocket int32 `json:"coresPerSocket"`
	// ThreadsPerCore is the hardware threads of each core (2 with SMT on).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	ThreadsPerCore int32 `json:"threadsPerCore"`
}

// WorkerUpdateStrategy paces worker updates.
type WorkerUpdateStrategy struct {
	// MaxUnavailable is how many workers may be draining or being replaced at once: a number, or
	// a percentage of the size rounded down ("25%"). At least one is always allowed. Unset: 10%.
	// Busy workers count while they drain, so a larger value drains more nodes ahead of time,
	// which frees them for the update sooner but keeps more of them from taking new jobs.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[1-9][0-9]?%$|^100%$')",message="maxUnavailable is a number of workers (at least 1) or a percentage of the size from 1% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}
