package controller

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/activecheck"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// The operator's own metrics, served with controller-runtime's on the manager's metrics
// endpoint (docs/observability.md lists them). Per-cluster series carry the namespace and the
// SlurmCluster's name, and are dropped when the cluster is deleted.
var (
	phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "slurm_operator_reconcile_phase_duration_seconds",
		Help:    "How long each phase of a SlurmCluster reconcile took.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15},
	}, []string{"phase"})
	phaseErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "slurm_operator_reconcile_phase_errors_total",
		Help: "Phases of SlurmCluster reconciles that failed (an API error; a spec the status explains is not one).",
	}, []string{"phase"})
	slurmRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "slurm_operator_slurm_requests_total",
		Help: "Requests to slurmctld through slurmrestd, by call and result (ok, error).",
	}, []string{"call", "result"})
	slurmRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "slurm_operator_slurm_request_duration_seconds",
		Help:    "How long requests to slurmctld through slurmrestd took, by call.",
		Buckets: []float64{0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15},
	}, []string{"call"})
	workersLeaving = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_scale_down_workers_waiting",
		Help: "Workers a scale-down keeps until their jobs end (drained in Slurm, still in the StatefulSet).",
	}, []string{"namespace", "slurmcluster"})
	scaleDownWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_scale_down_waiting_seconds",
		Help: "How long the current scale-down has waited for jobs (0 when none waits).",
	}, []string{"namespace", "slurmcluster"})
	scaleDownGrace = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_scale_down_grace_seconds",
		Help: "The cluster's scaleDownGracePeriodSeconds (no series when unset: a scale-down waits for the jobs however long they run).",
	}, []string{"namespace", "slurmcluster"})
	nodeHealthDrained = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_workers_drained_for_node_health",
		Help: "Workers drained because their Kubernetes node is cordoned, not ready, short of GPUs or has a condition named in drainOnNodeConditions.",
	}, []string{"namespace", "slurmcluster"})
	strandedWorkers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_stranded_worker_pods",
		Help: "Worker pods whose deletion waits for a lost Kubernetes node (not ready past the pod's grace period).",
	}, []string{"namespace", "slurmcluster"})
	jailPopulated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_jail_populated",
		Help: "1 when the cluster's jail is populated (or not managed), else 0.",
	}, []string{"namespace", "slurmcluster"})
	checkFailingSince = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_active_check_failing_since_timestamp_seconds",
		Help: "When a worker's unbroken run of failures of an active check began (seconds since the epoch); a series per failing worker and check.",
	}, []string{"namespace", "slurmcluster", "check", "node"})
	backupLastSchedule = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_backup_last_schedule_timestamp_seconds",
		Help: "When the scheduled backups' CronJob last started a backup Job (seconds since the epoch; 0 before the first); no series without spec.backups.",
	}, []string{"namespace", "slurmcluster"})
	backupLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_backup_last_success_timestamp_seconds",
		Help: "When a scheduled backup Job last completed, its backup written whole (seconds since the epoch; 0 before the first); no series without spec.backups.",
	}, []string{"namespace", "slurmcluster"})
	checkNextRun = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_active_check_next_run_timestamp_seconds",
		Help: "When the active check that drained a worker runs on it again (seconds since the epoch); a series per worker an active check holds drained.",
	}, []string{"namespace", "slurmcluster", "check", "node"})
	elasticNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "slurm_operator_elastic_nodes",
		Help: "Nodes of each elastic worker set (autoscaling) by Slurm's power state: up, powering_up, powered_down (powering down included), resume_failed (powered down and DOWN: a resume that timed out, until an admin resumes the node).",
	}, []string{"namespace", "slurmcluster", "set", "power"})
	elasticResumeWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "slurm_operator_elastic_resume_wait_seconds",
		Help:    "For each job an elastic worker set's nodes were powered up for, how long it waited from its submit until all its nodes were ready (Slurm's start time, which it sets when the last of the job's powered-up nodes registers, less the submit time).",
		Buckets: []float64{10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200},
	}, []string{"namespace", "slurmcluster", "set"})
	elasticResumeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "slurm_operator_elastic_resume_failures_total",
		Help: "Power-ups of an elastic worker set's nodes that ended with the node down instead of up: Slurm's ResumeTimeout passed before its pod's slurmd registered (the pod Pending, or failing to start), or an admin downed it meanwhile.",
	}, []string{"namespace", "slurmcluster", "set"})
)

var operatorMetrics = []prometheus.Collector{phaseDuration, phaseErrors, slurmRequests, slurmRequestDuration,
	workersLeaving, scaleDownWaiting, scaleDownGrace, nodeHealthDrained, strandedWorkers, jailPopulated, checkFailingSince, checkNextRun, backupLastSchedule, backupLastSuccess, elasticNodes, elasticResumeWait, elasticResumeFailures}

func init() {
	metrics.Registry.MustRegister(operatorMetrics...)
}

// MetricNames are the names of the operator's own metrics (besides controller-runtime's).
func MetricNames() []string {
	ch := make(chan *prometheus.Desc, len(operatorMetrics))
	for _, c := range operatorMetrics {
		c.Describe(ch)
	}
	close(ch)
	var names []string
	for d := range ch {
		// A Desc prints as Desc{fqName: "NAME", …}.
		if _, rest, ok := strings.Cut(d.String(), `fqName: "`); ok {
			name, _, _ := strings.Cut(rest, `"`)
			names = append(names, name)
		}
	}
	return names
}

// observePhase records one phase's duration, and its failure when err is a real error.
func observePhase(name string, took time.Duration, err error) {
	phaseDuration.WithLabelValues(name).Observe(took.Seconds())
	if err != nil && err != errHalt {
		phaseErrors.WithLabelValues(name).Inc()
	}
}

// observeSlurm records one request to Slurm.
func observeSlurm(call string, took time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	slurmRequests.WithLabelValues(call, result).Inc()
	slurmRequestDuration.WithLabelValues(call).Observe(took.Seconds())
}

// observeCluster records a cluster's gauges from what the reconcile found and the status it
// computed.
func observeCluster(sc *slurmv1alpha1.SlurmCluster, st slurmv1alpha1.SlurmClusterStatus, o *observed, now time.Time) {
	ns, name := sc.Namespace, sc.Name
	if g := sc.Spec.SlurmNodes.Worker.ScaleDownGracePeriodSeconds; g != nil {
		scaleDownGrace.WithLabelValues(ns, name).Set(float64(*g))
	} else {
		scaleDownGrace.DeleteLabelValues(ns, name)
	}
	if o.scalingDecided {
		leaving, waited := 0.0, 0.0
		if o.scaling.active {
			leaving = float64(o.scaling.replicas - sc.Spec.SlurmNodes.Worker.NodeCount())
			for _, set := range sc.WorkerSets()[1:] {
				if n, ok := o.scaling.sets[set.Name]; ok && n > set.Worker.NodeCount() {
					leaving += float64(n - set.Worker.NodeCount())
				}
			}
			if c := meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionScalingDown); c != nil && c.Status == "True" {
				waited = now.Sub(c.LastTransitionTime.Time).Seconds()
			}
		}
		workersLeaving.WithLabelValues(ns, name).Set(leaving)
		scaleDownWaiting.WithLabelValues(ns, name).Set(waited)
	}
	if o.slurmReached {
		drained := 0.0
		for _, n := range o.slurmNodes {
			if n.Has("DRAIN") && strings.HasPrefix(n.Reason, slurmfacts.DrainKubernetesNode+" ") {
				drained++
			}
		}
		nodeHealthDrained.WithLabelValues(ns, name).Set(drained)
	}
	if !o.childrenUnknown {
		strandedWorkers.WithLabelValues(ns, name).Set(float64(len(o.stranded)))
	}
	if o.scalingDecided {
		elasticNodes.DeletePartialMatch(prometheus.Labels{"namespace": ns, "slurmcluster": name})
		for set, p := range o.power {
			elasticNodes.WithLabelValues(ns, name, set, "up").Set(float64(p.Up))
			elasticNodes.WithLabelValues(ns, name, set, "powering_up").Set(float64(p.PoweringUp))
			elasticNodes.WithLabelValues(ns, name, set, "powered_down").Set(float64(p.Down))
			elasticNodes.WithLabelValues(ns, name, set, "resume_failed").Set(float64(p.Failed))
		}
	}
	populated := 0.0
	if meta.IsStatusConditionTrue(st.Conditions, slurmv1alpha1.ConditionJailPopulated) {
		populated = 1
	}
	jailPopulated.WithLabelValues(ns, name).Set(populated)
	switch {
	case sc.Spec.Backups == nil:
		backupLastSchedule.DeleteLabelValues(ns, name)
		backupLastSuccess.DeleteLabelValues(ns, name)
	case o.backups != nil:
		backupLastSchedule.WithLabelValues(ns, name).Set(unixOrZero(o.backups.Status.LastScheduleTime))
		backupLastSuccess.WithLabelValues(ns, name).Set(unixOrZero(o.backups.Status.LastSuccessfulTime))
	}
	if o.checksDecided {
		checkFailingSince.DeletePartialMatch(prometheus.Labels{"namespace": ns, "slurmcluster": name})
		for _, c := range st.ActiveChecks {
			for _, f := range c.Failing {
				if f.Since != nil {
					checkFailingSince.WithLabelValues(ns, name, c.Name, f.Node).Set(float64(f.Since.Unix()))
				}
			}
		}
	}
	if o.checksDecided && o.slurmReached {
		checkNextRun.DeletePartialMatch(prometheus.Labels{"namespace": ns, "slurmcluster": name})
		for _, n := range st.Workers.OutOfService {
			if check, ok := activecheck.CheckOfReason(n.Reason); ok && n.NextCheck != nil {
				checkNextRun.WithLabelValues(ns, name, check, n.Name).Set(float64(n.NextCheck.Unix()))
			}
		}
	}
}

func unixOrZero(t *metav1.Time) float64 {
	if t == nil {
		return 0
	}
	return float64(t.Unix())
}

// forgetCluster drops a deleted cluster's series.
func forgetCluster(ns, name string) {
	for _, g := range []*prometheus.GaugeVec{workersLeaving, scaleDownWaiting, scaleDownGrace, nodeHealthDrained, strandedWorkers, jailPopulated, backupLastSchedule, backupLastSuccess} {
		g.DeleteLabelValues(ns, name)
	}
	checkFailingSince.DeletePartialMatch(prometheus.Labels{"namespace": ns, "slurmcluster": name})
	checkNextRun.DeletePartialMatch(prometheus.Labels{"namespace": ns, "slurmcluster": name})
	elasticNodes.DeletePartialMatch(prometheus.Labels{"namespace": ns, "slurmcluster": name})
	elasticResumeWait.DeletePartialMatch(prometheus.Labels{"namespace": ns, "slurmcluster": name})
	elasticResumeFailures.DeletePartialMatch(prometheus.Labels{"namespace": ns, "slurmcluster": name})
}
