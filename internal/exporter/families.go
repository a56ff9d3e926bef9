package exporter

import "github.com/prometheus/client_golang/prometheus"

// family is one metric name with its help, type and labels (besides the constant cluster
// label every metric carries).
type family struct {
	name, help string
	typ        prometheus.ValueType
	labels     []string
}

var families []*family

func newFamily(name, help string, typ prometheus.ValueType, labels ...string) *family {
	f := &family{name: name, help: help, typ: typ, labels: labels}
	families = append(families, f)
	return f
}

func gauge(name, help string, labels ...string) *family {
	return newFamily(name, help, prometheus.GaugeValue, labels...)
}

func counter(name, help string, labels ...string) *family {
	return newFamily(name, help, prometheus.CounterValue, labels...)
}

// Nodes, from the nodes answer.
var (
	nodeState  = gauge("slurm_node_state", "1 for each node, labelled with its state (idle, mixed, allocated, completing, draining, drained, down, fail, future, unknown) and, for draining, drained and failed nodes (and down nodes the operator drained first), who took it out (operator, admin) and, for the operator, why (update, scale-down, pod-stopping, health, kubernetes-node, check, other).", "node", "state", "reason_owner", "operator_reason")
	nodeReason = gauge("slurm_node_reason_since_timestamp_seconds", "For each drained, draining, down or failed node with a reason and its time: when the reason was set (seconds since the epoch), labelled with who took it out (operator, admin; \"\" for Slurm's own reason of a down node), why for the operator (as slurm_node_state), the reason's text (its first 200 characters) and the user who set it.", "node", "state", "reason_owner", "operator_reason", "reason", "set_by")
	nodeCPUs   = gauge("slurm_node_cpus", "CPUs of the node.", "node")
	nodeCPUsA  = gauge("slurm_node_cpus_allocated", "CPUs of the node allocated to jobs.", "node")
	nodeCPUsI  = gauge("slurm_node_cpus_idle", "CPUs of the node not allocated (whatever its state).", "node")
	nodeMem    = gauge("slurm_node_memory_bytes", "Memory of the node Slurm schedules (RealMemory).", "node")
	nodeMemA   = gauge("slurm_node_memory_allocated_bytes", "Memory of the node allocated to jobs.", "node")
	nodeMemI   = gauge("slurm_node_memory_idle_bytes", "Memory of the node not allocated.", "node")
	nodeGPUs   = gauge("slurm_node_gpus", "GPUs of the node by gres type (\"\" for untyped).", "node", "type")
	nodeGPUsA  = gauge("slurm_node_gpus_allocated", "GPUs of the node allocated to jobs, by type.", "node", "type")
	nodeGPUsI  = gauge("slurm_node_gpus_idle", "GPUs of the node not allocated, by type.", "node", "type")

	partNodes = gauge("slurm_partition_nodes", "Nodes of the partition by state and, for draining, drained and failed nodes, who took them out and why (as slurm_node_state).", "partition", "state", "reason_owner", "operator_reason")
	partCPUs  = gauge("slurm_partition_cpus", "CPUs of the partition's nodes.", "partition")
	partCPUsA = gauge("slurm_partition_cpus_allocated", "CPUs of the partition's nodes allocated to jobs.", "partition")
	partCPUsI = gauge("slurm_partition_cpus_idle", "CPUs of the partition's nodes not allocated.", "partition")
	partMem   = gauge("slurm_partition_memory_bytes", "Memory of the partition's nodes.", "partition")
	partMemA  = gauge("slurm_partition_memory_allocated_bytes", "Memory of the partition's nodes allocated to jobs.", "partition")
	partMemI  = gauge("slurm_partition_memory_idle_bytes", "Memory of the partition's nodes not allocated.", "partition")
	partGPUs  = gauge("slurm_partition_gpus", "GPUs of the partition's nodes, by type.", "partition", "type")
	partGPUsA = gauge("slurm_partition_gpus_allocated", "GPUs of the partition's nodes allocated to jobs, by type.", "partition", "type")
	partGPUsI = gauge("slurm_partition_gpus_idle", "GPUs of the partition's nodes not allocated, by type.", "partition", "type")

	// A node set is the worker set a node belongs to: worker for spec.slurmNodes.worker, else
	// the name of its entry of spec.slurmNodes.nodeSets (its nodes are named <set>-<index>).
	setNodes = gauge("slurm_node_set_nodes", "Nodes of the node set by state and, for draining, drained and failed nodes, who took them out and why (as slurm_node_state).", "node_set", "state", "reason_owner", "operator_reason")
	setCPUs  = gauge("slurm_node_set_cpus", "CPUs of the node set's nodes.", "node_set")
	setCPUsA = gauge("slurm_node_set_cpus_allocated", "CPUs of the node set's nodes allocated to jobs.", "node_set")
	setCPUsI = gauge("slurm_node_set_cpus_idle", "CPUs of the node set's nodes not allocated.", "node_set")
	setMem   = gauge("slurm_node_set_memory_bytes", "Memory of the node set's nodes.", "node_set")
	setMemA  = gauge("slurm_node_set_memory_allocated_bytes", "Memory of the node set's nodes allocated to jobs.", "node_set")
	setMemI  = gauge("slurm_node_set_memory_idle_bytes", "Memory of the node set's nodes not allocated.", "node_set")
	setGPUs  = gauge("slurm_node_set_gpus", "GPUs of the node set's nodes, by type.", "node_set", "type")
	setGPUsA = gauge("slurm_node_set_gpus_allocated", "GPUs of the node set's nodes allocated to jobs, by type.", "node_set", "type")
	setGPUsI = gauge("slurm_node_set_gpus_idle", "GPUs of the node set's nodes not allocated, by type.", "node_set", "type")
	nodeSet  = gauge("slurm_node_info", "1 for each node, labelled with its node set: join on node to group any per-node metric by set.", "node", "node_set")
)

// Jobs, from the jobs answer.
var (
	partJobs    = gauge("slurm_partition_jobs", "Jobs slurmctld holds, by partition and state (pending, running, completing, suspended, and those that ended less than MinJobAge ago: completed, failed, cancelled, timeout, …).", "partition", "state")
	partPending = gauge("slurm_partition_jobs_pending", "Pending jobs by partition and the reason they wait (Resources, Priority, ReqNodeNotAvail, …).", "partition", "reason")
	partJobCPUs = gauge("slurm_partition_job_cpus", "CPUs of the partition's pending (requested) and running (allocated) jobs.", "partition", "state")
	partJobGPUs = gauge("slurm_partition_job_gpus", "GPUs of the partition's pending (requested) and running (allocated) jobs.", "partition", "state")
	acctJobs    = gauge("slurm_account_jobs", "Pending and running jobs by partition and account.", "partition", "account", "state")
	acctJobCPUs = gauge("slurm_account_job_cpus", "CPUs of pending and running jobs by partition and account.", "partition", "account", "state")
	acctJobGPUs = gauge("slurm_account_job_gpus", "GPUs of pending and running jobs by partition and account.", "partition", "account", "state")
	userJobs    = gauge("slurm_user_jobs", "Pending and running jobs by partition, account and user (only with per-user metrics on).", "partition", "account", "user", "state")
	userJobCPUs = gauge("slurm_user_job_cpus", "CPUs of pending and running jobs by partition, account and user (only with per-user metrics on).", "partition", "account", "user", "state")
	userJobGPUs = gauge("slurm_user_job_gpus", "GPUs of pending and running jobs by partition, account and user (only with per-user metrics on).", "partition", "account", "user", "state")
)

// Scheduler statistics, from the diag answer. The job counters count since slurmctld's
// statistics were last reset (start, midnight UTC, sdiag --reset): rate() handles the reset.
var (
	schedThreads    = gauge("slurm_scheduler_threads", "slurmctld's server threads (RPCs being served).")
	schedAgentQueue = gauge("slurm_scheduler_agent_queue_size", "RPCs slurmctld has queued to send to slurmd.")
	schedDBDQueue   = gauge("slurm_scheduler_dbd_agent_queue_size", "Messages slurmctld has queued for slurmdbd (grows while accounting is unreachable).")
	schedCycleLast  = gauge("slurm_scheduler_cycle_last_seconds", "Length of the main scheduler's last cycle.")
	schedCycleMean  = gauge("slurm_scheduler_cycle_mean_seconds", "Mean length of the main scheduler's cycles.")
	schedCycleMax   = gauge("slurm_scheduler_cycle_max_seconds", "Longest main scheduler cycle.")
	schedCycles     = counter("slurm_scheduler_cycles_total", "Main scheduler cycles.")
	schedQueue      = gauge("slurm_scheduler_queue_length", "Jobs the main scheduler's last cycle looked at.")
	bfCycleLast     = gauge("slurm_backfill_cycle_last_seconds", "Length of the backfill scheduler's last cycle.")
	bfCycleMean     = gauge("slurm_backfill_cycle_mean_seconds", "Mean length of the backfill scheduler's cycles.")
	bfCycleMax      = gauge("slurm_backfill_cycle_max_seconds", "Longest backfill cycle.")
	bfCycles        = counter("slurm_backfill_cycles_total", "Backfill scheduler cycles.")
	bfQueue         = gauge("slurm_backfill_queue_length", "Jobs the backfill scheduler's last cycle looked at.")
	bfJobs          = counter("slurm_backfilled_jobs_total", "Jobs started by the backfill scheduler.")
	bfActive        = gauge("slurm_backfill_active", "1 while a backfill cycle runs.")
	jobsSubmitted   = counter("slurm_jobs_submitted_total", "Jobs submitted.")
	jobsStarted     = counter("slurm_jobs_started_total", "Jobs started.")
	jobsCompleted   = counter("slurm_jobs_completed_total", "Jobs completed.")
	jobsCanceled    = counter("slurm_jobs_canceled_total", "Jobs cancelled.")
	jobsFailed      = counter("slurm_jobs_failed_total", "Jobs failed.")
	rpcs            = counter("slurm_rpcs_total", "RPCs slurmctld served, by message type (REQUEST_JOB_STEP_CREATE counts job steps started).", "type")
	rpcSeconds      = counter("slurm_rpc_seconds_total", "Time slurmctld spent serving RPCs, by message type.", "type")
	userRPCs        = counter("slurm_user_rpcs_total", "RPCs slurmctld served, by user (only with per-user metrics on).", "user")
	controllerUp    = gauge("slurm_controller_up", "1 when this slurmctld (primary or backup) answers slurmrestd's ping.", "host", "mode")
	controllerLat   = gauge("slurm_controller_ping_seconds", "How long this slurmctld took to answer the ping.", "host", "mode")
	databaseUp      = gauge("slurm_slurmdbd_up", "1 when slurmdbd (accounting) answers slurmrestd's ping; only with accounting.")
	up              = gauge("slurm_up", "1 when slurmctld answered the exporter's last request for nodes, 0 when it did not (the exporter cannot reach Slurm).")
	answerAge       = gauge("slurm_exporter_answer_age_seconds", "Age of the answer the metrics of this resource come from (nodes, jobs, diag, ping, database): near 0 when fresh, growing while slurmctld does not answer.", "resource")
	requestDuration = gauge("slurm_exporter_request_duration_seconds", "How long the exporter's last request for this resource took.", "resource")
	requestErrors   = counter("slurm_exporter_request_errors_total", "The exporter's failed requests, by resource.", "resource")
	scrapeDuration  = gauge("slurm_exporter_scrape_duration_seconds", "How long this scrape took.")
)

// MetricNames are the names of every metric the collector exports.
func MetricNames() []string {
	names := make([]string, len(families))
	for i, f := range families {
		names[i] = f.name
	}
	return names
}
