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
)
