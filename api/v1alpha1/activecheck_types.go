package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ActiveCheckProgram names one of the operator's own active checks.
// +kubebuilder:validation:Enum=JailWritable;MPIAllReduce;GPUErrors;DCGMDiag;NCCLAllReduce
type ActiveCheckProgram string

const (
	// ActiveCheckJailWritable writes, syncs and reads back 16 MiB in the jail as an ordinary
	// user (the job's), within the timeout, and wants the jail's free space above
	// periodicChecks.jailMinFreeSpace (1Gi when unset).
	ActiveCheckJailWritable ActiveCheckProgram = "JailWritable"
	// ActiveCheckMPIAllReduce runs a two-rank MPI all-reduce (srun over PMIx, mpi4py) between
	// pairs of workers over their network, and fails a worker whose best pair is slower than
	// bandwidthFloorPercent of the median worker's best.
	ActiveCheckMPIAllReduce ActiveCheckProgram = "MPIAllReduce"
	// ActiveCheckGPUErrors reads, with nvidia-smi, each GPU's uncorrected ECC errors since the
	// driver loaded and its row remapping (a pending remap or a failed one fails), and the
	// kernel's Xid messages where the kernel log is readable. GPU workers only.
	ActiveCheckGPUErrors ActiveCheckProgram = "GPUErrors"
	// ActiveCheckDCGMDiag runs `dcgmi diag -r dcgmLevel` (NVIDIA DCGM must be in the jail).
	// GPU workers only.
	ActiveCheckDCGMDiag ActiveCheckProgram = "DCGMDiag"
	// ActiveCheckNCCLAllReduce runs NCCL's all_reduce_perf (nccl-tests, in the jail) on every GPU
	// of pairs of workers and fails a worker whose best pair's bus bandwidth is below
	// bandwidthFloorPercent of the median worker's best. GPU workers only.
	ActiveCheckNCCLAllReduce ActiveCheckProgram = "NCCLAllReduce"
)

// ActiveCheckReaction is what a failed active check does to the node.
// +kubebuilder:validation:Enum=Drain;Comment;None
type ActiveCheckReaction string

const (
	// ActiveCheckDrain drains the node with the reason "slurm-operator: check NAME: OUTPUT";
	// the next passing run of the same check resumes it. Another drain (an admin's, the
	// Kubernetes node's) is never lifted by a check.
	ActiveCheckDrain ActiveCheckReaction = "Drain"
	// ActiveCheckComment sets the node's comment (sinfo -O comment, scontrol show node) to the
	// check's name and output, and clears it when the check passes; the node keeps taking jobs.
	ActiveCheckComment ActiveCheckReaction = "Comment"
	// ActiveCheckNone only records the failure (the status, an event).
	ActiveCheckNone ActiveCheckReaction = "None"
)

// ActiveCheckRunner is where an active check's program runs.
// +kubebuilder:validation:Enum=SlurmJob;KubernetesJob
type ActiveCheckRunner string

const (
	// ActiveCheckSlurmJob runs the check as the job's batch script, in the jail.
	ActiveCheckSlurmJob ActiveCheckRunner = "SlurmJob"
	// ActiveCheckKubernetesJob runs the check in a Kubernetes Job's pod on the worker's
	// Kubernetes node, from its own image, outside the jail, while a Slurm job of the operator
	// holds the worker.
	ActiveCheckKubernetesJob ActiveCheckRunner = "KubernetesJob"
)

// ActiveCheck is a check the operator runs as a Slurm batch job of its own on each worker
// that is idle (docs/health.md#active-checks): the job has the node to itself, so it never
// runs beside a user's job, and a queued job of a user waits for it at most its timeout. With
// runAs KubernetesJob, that job only holds the worker while a Kubernetes Job runs the check.
// +kubebuilder:validation:XValidation:rule="has(self.program) != has(self.script)",message="set exactly one of program (one of the operator's checks) and script (your own)"
// +kubebuilder:validation:XValidation:rule="!has(self.script) || !self.script.startsWith('#!') || self.script.startsWith('#!/bin/bash') || self.script.startsWith('#!/bin/sh')",message="script runs under bash: leave out the #! line"
// +kubebuilder:validation:XValidation:rule="!has(self.image) || (has(self.runAs) && self.runAs == 'KubernetesJob')",message="image is the pod's image of a check with runAs KubernetesJob",fieldPath=".image"
// +kubebuilder:validation:XValidation:rule="!has(self.runAs) || self.runAs != 'KubernetesJob' || !has(self.program) || self.program == 'GPUErrors' || self.program == 'DCGMDiag'",message="runAs KubernetesJob runs a script, GPUErrors or DCGMDiag: JailWritable needs the jail, and the all-reduce checks run across workers under Slurm",fieldPath=".runAs"
type ActiveCheck struct {
	// Name names the check in drain reasons, comments, the status and job names
	// (slurm-operator-check-NAME).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Program is one of the operator's checks: JailWritable, MPIAllReduce (pairs of workers),
	// GPUErrors, DCGMDiag, NCCLAllReduce (the last three on GPU workers only).
	// +optional
	Program ActiveCheckProgram `json:"program,omitempty"`

	// Script is a check of your own: bash run as the job's batch script on each worker, in the
	// jail, as the operator's user (slurm). Exit 0 passes; anything else fails, and the last
	// 160 characters of its output become the reason.
	// +kubebuilder:validation:MaxLength=16384
	// +optional
	Script string `json:"script,omitempty"`

	// RunAs is where the check runs: SlurmJob (the default), the job's batch script in the
	// jail as the operator's user; or KubernetesJob, a Kubernetes Job's pod pinned to the
	// worker pod's Kubernetes node, from image, outside the jail and outside Slurm, while a
	// Slurm job of the operator holds the worker (so no user's job runs beside it). A
	// KubernetesJob check sees SLURMD_NODENAME like a Slurm job; its pod asks for no GPU (the
	// worker pod holds them) and runs without privileges.
	// +kubebuilder:default=SlurmJob
	// +optional
	RunAs ActiveCheckRunner `json:"runAs,omitempty"`

	// Image is the image of a KubernetesJob check's pod (it needs bash); the worker image when
	// unset.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// IntervalMinutes is how long after a worker's last run of this check it runs again.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10080
	// +kubebuilder:default=60
	// +optional
	IntervalMinutes int32 `json:"intervalMinutes,omitempty"`

	// TimeoutSeconds is the job's time limit; a run that takes longer fails. A check job that
	// cannot start within this time (its nodes got busy) is cancelled by Slurm and tried again
	// at the operator's next look.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=7200
	// +kubebuilder:default=300
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// OnFailure is what a failed run does to the worker: Drain (the default), Comment or None.
	// +kubebuilder:default=Drain
	// +optional
	OnFailure ActiveCheckReaction `json:"onFailure,omitempty"`

	// AfterDrain, when true (the default), runs the check on a worker as soon as it is back
	// from a drain, a down or failed state that something else set (a cordoned Kubernetes node
	// made schedulable again, an admin's resume, a replaced pod), before its interval is up.
	// +kubebuilder:default=true
	// +optional
	AfterDrain *bool `json:"afterDrain,omitempty"`

	// GPUWorkersOnly runs a script on workers with GPUs only (the GPU programs always are).
	// +optional
	GPUWorkersOnly bool `json:"gpuWorkersOnly,omitempty"`

	// BandwidthFloorPercent is, for MPIAllReduce and NCCLAllReduce, how slow a worker's best
	// pair may be, in percent of the median worker's best, before it fails.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=50
	// +optional
	BandwidthFloorPercent int32 `json:"bandwidthFloorPercent,omitempty"`

	// DCGMLevel is the level DCGMDiag runs: 1 (seconds), 2 (about two minutes), 3 or 4 (up to
	// hours: raise timeoutSeconds).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4
	// +kubebuilder:default=1
	// +optional
	DCGMLevel int32 `json:"dcgmLevel,omitempty"`
}

// ActiveCheckStatus is what the last runs of one active check found.
type ActiveCheckStatus struct {
	// Name is the check's name.
	Name string `json:"name"`
	// LastRunTime is when a run of the check last ended on a worker.
	// +optional
	LastRunTime *metav1.Time `json:"lastRunTime,omitempty"`
	// NextRunTime is when the check is next due on a worker (it starts when that worker is
	// idle).
	// +optional
	NextRunTime *metav1.Time `json:"nextRunTime,omitempty"`
	// Passed counts the workers whose last run passed.
	// +optional
	Passed int32 `json:"passed,omitempty"`
	// Failing are the workers whose last run failed, with its output (the first 32).
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Failing []ActiveCheckFailure `json:"failing,omitempty"`
}

// ActiveCheckFailure is a worker whose last run of a check failed.
type ActiveCheckFailure struct {
	// Node is the Slurm node name.
	Node string `json:"node"`
	// Output is the end of the check's output (at most 160 characters).
	// +optional
	Output string `json:"output,omitempty"`
	// Since is when this worker's unbroken run of failures of the check began.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}
