package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// VolumeSource is a named volume the components can mount. Set exactly one source.
// +kubebuilder:validation:XValidation:rule="[has(self.persistentVolumeClaim), has(self.nfs), has(self.hostPath), has(self.emptyDir), has(self.csi)].filter(x, x).size() == 1",message="set exactly one of persistentVolumeClaim, nfs, hostPath, emptyDir, csi"
type VolumeSource struct {
	// Name is how components refer to this volume (volumeSourceName).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// PersistentVolumeClaim mounts an existing claim (for the jail: a ReadWriteMany claim of at
	// least 40Gi).
	// +optional
	PersistentVolumeClaim *ClaimSource `json:"persistentVolumeClaim,omitempty"`

	// NFS mounts an NFS export directly.
	// +optional
	NFS *NFSSource `json:"nfs,omitempty"`

	// HostPath mounts a directory of the Kubernetes node (for node-local scratch). The node's
	// root and its system directories (/etc, /usr, /var, …) are refused when the cluster is
	// rendered (condition Degraded, reason RenderFailed).
	// +optional
	HostPath *HostPathSource `json:"hostPath,omitempty"`

	// EmptyDir is a scratch directory that lives as long as the pod.
	// +optional
	EmptyDir *EmptyDirSource `json:"emptyDir,omitempty"`

	// CSI mounts an inline CSI volume.
	// +optional
	CSI *CSISource `json:"csi,omitempty"`
}

// SpoolVolume is a daemon's state directory: a claim made from a template, or a named volume
// source. Set exactly one.
// +kubebuilder:validation:XValidation:rule="has(self.volumeClaimTemplateSpec) != has(self.volumeSourceName)",message="set exactly one of volumeClaimTemplateSpec and volumeSourceName"
// +kubebuilder:validation:XValidation:rule="has(self.volumeClaimTemplateSpec) == has(oldSelf.volumeClaimTemplateSpec)",message="cannot switch between a claim template and a volume source: a StatefulSet's claim templates cannot change"
type SpoolVolume struct {
	// VolumeClaimTemplateSpec makes one claim per pod from this template. It cannot change once
	// set: Kubernetes makes a StatefulSet's claims from it once and refuses any change to it
	// (resize the claims themselves instead).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable: a StatefulSet's claim template cannot change; resize the claims themselves"
	// +kubebuilder:validation:XValidation:rule="has(self.accessModes) && size(self.accessModes) > 0",message="at least one access mode is required, for example ReadWriteOnce",fieldPath=".accessModes"
	// +kubebuilder:validation:XValidation:rule="!has(self.accessModes) || (size(self.accessModes) <= 4 && [0, 1, 2, 3].all(i, i >= size(self.accessModes) || self.accessModes[i] in ['ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany', 'ReadWriteOncePod']))",message="access modes are ReadWriteOnce, ReadOnlyMany, ReadWriteMany and ReadWriteOncePod",fieldPath=".accessModes"
	// +kubebuilder:validation:XValidation:rule="has(self.resources) && has(self.resources.requests) && 'storage' in self.resources.requests",message="a storage request is required, for example 10Gi",fieldPath=".resources"
	// +optional
	VolumeClaimTemplateSpec *corev1.PersistentVolumeClaimSpec `json:"volumeClaimTemplateSpec,omitempty"`

	// VolumeSourceName names an entry of spec.volumeSources.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	VolumeSourceName string `json:"volumeSourceName,omitempty"`
}

// JailVolume is the shared root file system.
type JailVolume struct {
	// VolumeSourceName names an entry of spec.volumeSources (a ReadWriteMany volume).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	VolumeSourceName string `json:"volumeSourceName"`
}

// JailSubMount mounts a volume inside the jail.
type JailSubMount struct {
	// Name of the sub-mount; a sub-mount of the same name on login and workers must have the
	// same mountPath. At most 49 characters: it names the pod volume jail-submount-NAME.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// MountPath is the absolute path inside the jail, written plainly (no '//', '.' or '..'
	// segments, no trailing '/'). It may not be, or be under, a directory of the jail's system or
	// one the pods' entrypoint mounts (/proc, /sys, /dev, /run, /etc, /usr, /bin, /sbin, /lib,
	// /lib64, /boot, /var/spool/slurmd, /var/run), nor be /tmp, /var or /var/spool.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^/[^\r\n:]*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="must not contain '..'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('//|/[.](/|$)|/$')",message="must be written plainly: no '//', no '.' segment, no trailing '/'"
	// +kubebuilder:validation:XValidation:rule="!['/proc', '/sys', '/dev', '/run', '/etc', '/usr', '/bin', '/sbin', '/lib', '/lib64', '/boot', '/var/spool/slurmd', '/var/run'].exists(d, self == d || self.startsWith(d + '/')) && !(self in ['/tmp', '/var', '/var/spool'])",message="must not hide a system directory of the jail or one the pods mount (such as /etc/slurm)"
	MountPath string `json:"mountPath"`

	// VolumeSourceName names an entry of spec.volumeSources.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	VolumeSourceName string `json:"volumeSourceName"`

	// ReadOnly mounts the volume read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// ConfigLine is one line of Slurm configuration text. It can hold no newline, so it cannot add
// a second setting that validation did not see.
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:XValidation:rule="!self.contains('\\n') && !self.contains('\\r')",message="must be a single line: a newline would add Slurm settings"
type ConfigLine string

// ProgramPaths is one absolute program path in the jail, or a comma-separated list of them, as
// Slurm's Prolog and Epilog take. It holds nothing else: no space, '=', '#' or quote that could
// add a second setting to the line.
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:Pattern=`^/[^\s=#",]+(,/[^\s=#",]+)*$`
type ProgramPaths string

// CgroupValue is the value of one cgroup.conf key: one word, with no space, '=', '#' or quote
// that could add a second setting to the line.
// +kubebuilder:validation:MaxLength=256
// +kubebuilder:validation:Pattern=`^[^\s=#"]+$`
type CgroupValue string

// SlurmConfig holds the Slurm settings an admin may change.
// +kubebuilder:validation:XValidation:rule="!(has(self.defMemPerNode) && has(self.defMemPerCPU))",message="set at most one of defMemPerNode and defMemPerCPU: Slurm takes one default memory per job"
type SlurmConfig struct {
	// Partitions of the cluster. When empty, one default partition "main" holds every worker of
	// every set.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Partitions []Partition `json:"partitions,omitempty"`

	// Topology describes how the workers' Kubernetes nodes are connected (an NVLink domain, a
	// rack, a network switch), read from node labels the admin names, so that Slurm places a
	// multi-node job on workers close to each other. Unset: Slurm treats every worker alike.
	// +optional
	Topology *NetworkTopology `json:"topology,omitempty"`

	// DefMemPerNode is the memory in MiB a job gets per node when it asks for none
	// (DefMemPerNode). Unset, and with defMemPerCPU unset, a job gets memory per CPU
	// (DefMemPerCPU): a worker's RealMemory divided by its CPUs, when both are known from
	// spec.slurmNodes.worker.resources. It must not exceed a worker's RealMemory.
	// +kubebuilder:validation:Minimum=0
	// +optional
	DefMemPerNode *int64 `json:"defMemPerNode,omitempty"`

	// DefMemPerCPU is the memory in MiB a job gets per allocated CPU when it asks for none
	// (DefMemPerCPU). Unset, it is a worker's RealMemory divided by its CPUs, so that a job with
	// a node's every CPU gets the node's memory, and a job with one GPU gets its GPU's share.
	// Times a worker's CPUs, it must not exceed the worker's RealMemory.
	// +kubebuilder:validation:Minimum=1
	// +optional
	DefMemPerCPU *int64 `json:"defMemPerCPU,omitempty"`

	// DefCPUPerGPU is the CPUs a job gets per GPU when it asks for none (DefCpuPerGPU). Unset,
	// it is a worker's CPUs divided by its GPUs, so a job asking for every GPU of a node gets the
	// node's CPUs. Times a worker's GPUs, it must not exceed the worker's CPUs: a job asking for
	// every GPU without -c could never start.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1024
	// +optional
	DefCPUPerGPU *int32 `json:"defCpuPerGPU,omitempty"`

	// CompleteWait is the seconds to wait for a finished job's nodes before scheduling new jobs
	// (CompleteWait).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	CompleteWait *int32 `json:"completeWait,omitempty"`

	// MaxJobCount is how many jobs slurmctld keeps in memory (MaxJobCount).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxJobCount *int32 `json:"maxJobCount,omitempty"`

	// MessageTimeout is the seconds a Slurm message may take to be answered (MessageTimeout).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MessageTimeout *int32 `json:"messageTimeout,omitempty"`

	// Prolog is a program in the jail run on each node before a job (Prolog).
	// +optional
	Prolog *ProgramPaths `json:"prolog,omitempty"`

	// Epilog is a program in the jail run on each node after a job (Epilog).
	// +optional
	Epilog *ProgramPaths `json:"epilog,omitempty"`

	// CgroupConfig sets keys of cgroup.conf; each replaces the generated value of the same key
	// (for example ConstrainRAMSpace: "no").
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[A-Za-z][A-Za-z0-9]*$'))",message="keys must be cgroup.conf setting names (letters and digits)"
	// +optional
	CgroupConfig map[string]CgroupValue `json:"cgroupConfig,omitempty"`

	// ExtraSlurmConf are raw slurm.conf lines included after the generated settings, so they win.
	// A SlurmctldParameters line must keep enable_configless: workers fetch their config from
	// slurmctld. A PrologFlags line must keep Contain: an ssh session on a worker joins its job
	// through the job's extern step (pam_slurm_adopt), and without one users could not log in.
	// SrunPortRange is the operator's: the NetworkPolicies open that range on login and worker
	// pods for srun's callbacks. TopologyPlugin comes from topology, with the topology.conf it
	// reads (TopologyParam may be set here).
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(l, !l.matches('^ *(?i)slurmctldparameters *=') || l.contains('enable_configless'))",message="a SlurmctldParameters line must keep enable_configless: workers fetch their config from slurmctld"
	// +kubebuilder:validation:XValidation:rule="self.all(l, !l.matches('^ *(?i)prologflags *=') || l.matches('(?i)contain'))",message="a PrologFlags line must keep Contain: ssh sessions on workers join their jobs through the extern step (pam_slurm_adopt)"
	// +kubebuilder:validation:XValidation:rule="self.all(l, !l.matches('^ *(?i)srunportrange *='))",message="SrunPortRange is set by the operator: the NetworkPolicies open that range for the callbacks of srun"
	// +kubebuilder:validation:XValidation:rule="self.all(l, !l.matches('^ *(?i)topologyplugin *='))",message="TopologyPlugin is set by spec.slurmConfig.topology, which also writes the topology.conf it reads"
	// +kubebuilder:validation:MaxItems=256
	// +optional
	ExtraSlurmConf []ConfigLine `json:"extraSlurmConf,omitempty"`
}

// Partition is a Slurm partition.
type Partition struct {
	// Name of the partition.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+$`
	Name string `json:"name"`

	// Default makes this the partition jobs go to when they name none.
	// +optional
	Default bool `json:"default,omitempty"`

	// NodeSets are the worker sets whose nodes the partition holds: worker
	// (spec.slurmNodes.worker) and names of spec.slurmNodes.nodeSets. A set may be in several
	// partitions. Empty: every set's nodes.
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:items:MaxLength=11
	// +listType=set
	// +optional
	NodeSets []string `json:"nodeSets,omitempty"`

	// MaxTime is the longest a job may run, in Slurm's time format (INFINITE, minutes,
	// days-hours:minutes:seconds, …).
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(INFINITE|UNLIMITED|[0-9]+(-[0-9]+)?(:[0-9]+){0,2})$`
	// +optional
	MaxTime string `json:"maxTime,omitempty"`

	// Options are further PartitionName settings as Key=Value words (for example
	// "OverSubscribe=EXCLUSIVE PriorityTier=2").
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^([A-Za-z]+=[^\s=]+)( [A-Za-z]+=[^\s=]+)*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(?i)(^| )(partitionname|nodes)=')",message="must not set PartitionName or Nodes: the operator sets them"
	// +optional
	Options string `json:"options,omitempty"`
}

// LabelAllowReference, set to "true" on a Secret, lets SlurmClusters in its namespace read it
// (spec.slurmNodes.accounting.externalDB.passwordSecretKeyRef). Without it the operator does not
// read the Secret: whoever may write a SlurmCluster cannot make the operator copy any Secret of
// the namespace into slurmdbd.conf and on to a database host of their choice.
const LabelAllowReference = "slurm.hpc.dev/allow-reference"
