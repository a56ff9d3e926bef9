package v1alpha1

// The condition types of a SlurmCluster's status. docs/reconcile.md says what sets each.
const (
	// ConditionAvailable: slurmctld is up, the jail is populated and a worker is ready.
	ConditionAvailable = "Available"
	// ConditionControllerAvailable: every slurmctld pod is ready.
	ConditionControllerAvailable = "ControllerAvailable"
	// ConditionWorkersAvailable: every worker pod is ready.
	ConditionWorkersAvailable = "WorkersAvailable"
	// ConditionLoginAvailable: every login pod is ready.
	ConditionLoginAvailable = "LoginAvailable"
	// ConditionAccountingAvailable: slurmdbd is ready, or accounting is off.
	ConditionAccountingAvailable = "AccountingAvailable"
	// ConditionJailPopulated: the populate Job completed, or the jail is not managed.
	ConditionJailPopulated = "JailPopulated"
	// ConditionDegraded: something the spec asks for could not be done; the message says what.
	ConditionDegraded = "Degraded"
	// ConditionGPUShape: the workers' GPU shape is known and every selected node agrees.
	ConditionGPUShape = "GPUShape"
	// ConditionScalingDown: a scale-down waits for leaving workers to drain.
	ConditionScalingDown = "ScalingDown"
	// ConditionWorkersUpdating: outdated worker pods are being replaced, one drained node at a time.
	ConditionWorkersUpdating = "WorkersUpdating"
	// ConditionSlurmUpgrading: a change of Slurm release waits for an earlier stage (slurmdbd,
	// then slurmctld) before the next one's images are rolled.
	ConditionSlurmUpgrading = "SlurmUpgrading"
)

// The reasons of the conditions above, by condition. docs/reconcile.md says when each is set.
const (
	// Available.

	// ReasonClusterReady: slurmctld is up, the jail is populated and workers are ready.
	ReasonClusterReady = "ClusterReady"
	// ReasonControllerUnavailable: no slurmctld pod is ready.
	ReasonControllerUnavailable = "ControllerUnavailable"
	// ReasonControllerStateUnreadable: slurmctld stops at start because it cannot read a state
	// file (it is never started with -i, which would drop the jobs the file holds).
	ReasonControllerStateUnreadable = "ControllerStateUnreadable"
	// ReasonJailNotPopulated: the jail is not populated yet.
	ReasonJailNotPopulated = "JailNotPopulated"
	// ReasonNoWorkerReady: no worker pod is ready yet.
	ReasonNoWorkerReady = "NoWorkerReady"

	// Available and Degraded, when nothing could be rendered.

	// ReasonRenderFailed: the spec could not be turned into objects.
	ReasonRenderFailed = "RenderFailed"
	// ReasonMungeKeyMissing: the munge key Secret is gone while the cluster's daemons run with it.
	ReasonMungeKeyMissing = "MungeKeyMissing"
	// ReasonPolicyViolation: the spec asks for an image or host path the operator's policy refuses.
	ReasonPolicyViolation = "PolicyViolation"
	// ReasonSlurmReleaseRefused: the images' Slurm releases cannot run together, or cannot follow
	// the running release in place (a downgrade, or a jump over more than three releases).
	ReasonSlurmReleaseRefused = "SlurmReleaseRefused"
	// ReasonSpoolNotShared: a backup controller's spool is a claim that is not ReadWriteMany, so
	// the two slurmctld could not share their saved state.
	ReasonSpoolNotShared = "SpoolNotShared"

	// ControllerAvailable, WorkersAvailable, LoginAvailable and AccountingAvailable, from their
	// StatefulSet.

	// ReasonAllReady: every pod is ready.
	ReasonAllReady = "AllReady"
	// ReasonPartiallyReady: some pods are ready.
	ReasonPartiallyReady = "PartiallyReady"
	// ReasonWorkerPodsPending: worker pods the size wants cannot start (Kubernetes cannot
	// place them, or their image cannot be pulled); the message says why, as Kubernetes does.
	ReasonWorkerPodsPending = "WorkerPodsPending"
	// ReasonWorkerPodsRefused: worker pods the size wants do not exist because Kubernetes
	// refused to create them (a ResourceQuota, a LimitRange, an admission webhook); the
	// message gives the API server's words, from the StatefulSet's FailedCreate event.
	ReasonWorkerPodsRefused = "WorkerPodsRefused"
	// ReasonWorkerNodeUnhealthy: worker pods are not ready because their Kubernetes node is
	// not sound (not ready: lost, shut down or cut off from the API server; cordoned; short of
	// GPUs); the message names each pod, its node and what is wrong.
	ReasonWorkerNodeUnhealthy = "WorkerNodeUnhealthy"
	// ReasonWorkerNodeLost: worker pods are stranded on a Kubernetes node that does not answer
	// (Degraded); the message names each pod and its node.
	ReasonWorkerNodeLost = "WorkerNodeLost"
	// ReasonNotReady: no pod is ready.
	ReasonNotReady = "NotReady"
	// ReasonNotCreated: the StatefulSet does not exist yet.
	ReasonNotCreated = "NotCreated"

	// AccountingAvailable.

	// ReasonDisabled: accounting is off.
	ReasonDisabled = "Disabled"
	// ReasonMariaDBOperatorMissing: the spec asks for mariadb-operator, whose API is not served.
	ReasonMariaDBOperatorMissing = "MariaDBOperatorMissing"
	// ReasonDatabaseSecretMissing: the external database's password Secret (or key) is missing.
	ReasonDatabaseSecretMissing = "DatabaseSecretMissing"
	// ReasonIdentitySecretMissing: the SSSD Secret of spec.identity.sssd is missing, or has no
	// sssd.conf.
	ReasonIdentitySecretMissing = "IdentitySecretMissing"
	// ReasonIdentitySecretInvalid: the SSSD Secret's sssd.conf lacks what the pods need (a
	// service, a domain's section, a provider the images carry).
	ReasonIdentitySecretInvalid = "IdentitySecretInvalid"
	// ReasonIdentitySecretNotAllowed: the SSSD Secret lacks the allow-reference label.
	ReasonIdentitySecretNotAllowed = "IdentitySecretNotAllowed"
	// ReasonDatabaseSecretNotAllowed: the password Secret lacks the allow-reference label.
	ReasonDatabaseSecretNotAllowed = "DatabaseSecretNotAllowed"
	// ReasonDatabasePasswordUnusable: the password cannot be written into slurmdbd.conf.
	ReasonDatabasePasswordUnusable = "DatabasePasswordUnusable"

	// JailPopulated.

	// ReasonNotManaged: spec.populateJail is unset; the jail is used as it is.
	ReasonNotManaged = "NotManaged"
	// ReasonJobPending: the populate Job is not created yet.
	ReasonJobPending = "JobPending"
	// ReasonPopulating: the populate Job runs.
	ReasonPopulating = "Populating"
	// ReasonPopulated: the populate Job completed.
	ReasonPopulated = "Populated"
	// ReasonJobFailed: the populate Job failed.
	ReasonJobFailed = "JobFailed"
	// ReasonOverwriteWaiting: an overwrite waits for every pod that runs in the jail to stop.
	ReasonOverwriteWaiting = "OverwriteWaiting"

	// Degraded.

	// ReasonAsExpected: nothing is wrong.
	ReasonAsExpected = "AsExpected"
	// ReasonReconcileFailed: a step of the reconcile failed (an API error).
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonApplyFailed: the API server refused some objects.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonSpecValueNotUsed: a value of the spec was not used, and the cluster runs with
	// another (a scheduling default with which a job asking for a whole node could not start);
	// the message names the field and the value used.
	ReasonSpecValueNotUsed = "SpecValueNotUsed"
	// ReasonPriorityClassMissing: the manager's control-plane PriorityClass does not exist (or
	// cannot be read), so slurmctld, slurmdbd and MariaDB run without one until it does.
	ReasonPriorityClassMissing = "PriorityClassMissing"
	// ReasonOptionalAPIMissing: an optional object (ServiceMonitor) is left out: its API is not served.
	ReasonOptionalAPIMissing = "OptionalAPIMissing"

	// GPUShape.

	// ReasonFromSpec: the shape is the spec's spec.slurmNodes.worker.gpu.
	ReasonFromSpec = "FromSpec"
	// ReasonFromNodeLabels: the shape comes from the GPU Operator's labels on the selected nodes.
	ReasonFromNodeLabels = "FromNodeLabels"
	// ReasonNodesDisagree: the selected nodes have different GPU shapes.
	ReasonNodesDisagree = "NodesDisagree"
	// ReasonNoGPUNodes: no selected node has GPUs.
	ReasonNoGPUNodes = "NoGPUNodes"

	// ScalingDown and WorkersUpdating.

	// ReasonRemovingNodes: the leaving workers are drained and idle; their pods are removed.
	ReasonRemovingNodes = "RemovingNodes"
	// ReasonWaitingForJobs: leaving workers are drained and still run jobs.
	ReasonWaitingForJobs = "WaitingForJobs"
	// ReasonGracePeriodExpired: the scale-down's grace period passed; workers go with their jobs.
	ReasonGracePeriodExpired = "GracePeriodExpired"
	// ReasonSlurmUnreachable: slurmctld could not be asked; nothing is removed.
	ReasonSlurmUnreachable = "SlurmUnreachable"
	// ReasonSlurmAnswerIncomplete: slurmctld's answer lacks some nodes; nothing is removed.
	ReasonSlurmAnswerIncomplete = "SlurmAnswerIncomplete"
	// SlurmUpgrading.

	// ReasonWaitingForAccounting: slurmdbd is not yet on the new release and ready everywhere;
	// slurmctld, the workers and login nodes keep the release they run.
	ReasonWaitingForAccounting = "WaitingForAccounting"
	// ReasonWaitingForController: slurmctld is not yet on the new release and ready everywhere;
	// the workers and login nodes keep the release they run.
	ReasonWaitingForController = "WaitingForController"
	// ReasonBackupNotConfigured: an upgrade of slurmdbd or slurmctld waits for
	// spec.upgrades.backup (a volume, or skip); nothing is rolled.
	ReasonBackupNotConfigured = "BackupNotConfigured"
	// ReasonWaitingForBackup: the backup Job before an upgrade runs; nothing is rolled yet.
	ReasonWaitingForBackup = "WaitingForBackup"
	// ReasonBackupFailed: the backup Job before an upgrade failed; nothing is rolled until it
	// is deleted (and runs again) or the spec says skip.
	ReasonBackupFailed = "BackupFailed"

	// ReasonDone: no scale-down in progress (ScalingDown), no change of release waits
	// (SlurmUpgrading).
	ReasonDone = "Done"
	// ReasonReplacingPods: outdated worker pods are replaced, one drained node at a time.
	ReasonReplacingPods = "ReplacingPods"
	// ReasonResumingNodes: the update is over; the nodes it drained are resumed.
	ReasonResumingNodes = "ResumingNodes"
	// ReasonAllUpToDate: every worker pod runs the current template.
	ReasonAllUpToDate = "AllUpToDate"
)

// Reasons of events that are not a condition's change.
const (
	// EventScaleDownGraceExpired: a scale-down's grace period passed and workers are removed
	// with their jobs.
	EventScaleDownGraceExpired = "ScaleDownGraceExpired"
	// EventWorkerPodPending: a worker pod the size wants cannot start; the note names it and
	// Kubernetes' reason.
	EventWorkerPodPending = "WorkerPodPending"
	// EventWorkerPodRefused: Kubernetes refused to create a worker pod the size wants; the
	// note names it and gives the API server's words.
	EventWorkerPodRefused = "WorkerPodRefused"
	// EventWorkerNodeLost: a worker pod is stranded on a lost Kubernetes node.
	EventWorkerNodeLost = "WorkerNodeLost"
)

// Available and Degraded, when a key Secret of a cluster that ran is gone (the munge key's is
// ReasonMungeKeyMissing above). Nothing is rendered until the Secret is restored.
const (
	// ReasonJWTKeyMissing: the JWT key Secret is gone while slurmctld and slurmdbd run with its
	// key; tokens signed with a new key would be refused.
	ReasonJWTKeyMissing = "JWTKeyMissing"
	// ReasonSSHHostKeysMissing: the SSH host keys Secret is gone while login and worker nodes
	// present its keys; users' ssh clients would refuse new ones.
	ReasonSSHHostKeysMissing = "SSHHostKeysMissing"
)
