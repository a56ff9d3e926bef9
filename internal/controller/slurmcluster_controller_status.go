package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

func findCondition(st *slurmv1alpha1.SlurmClusterStatus, t string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, t)
}

// computeStatus derives the status from what the reconcile observed. It is pure.
func computeStatus(sc *slurmv1alpha1.SlurmCluster, prev slurmv1alpha1.SlurmClusterStatus, o *observed) slurmv1alpha1.SlurmClusterStatus {
	st := *prev.DeepCopy()
	set := func(t string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: sc.Generation,
		})
	}
	nodes := sc.Spec.SlurmNodes

	ctlOK, ctlReason, ctlMsg := statefulSetCondition(o.controller, "slurmctld")
	if len(o.stateUnreadable) > 0 {
		ctlOK, ctlReason, ctlMsg = false, slurmv1alpha1.ReasonControllerStateUnreadable, stateUnreadableMessage(o.stateUnreadable)
	}
	if o.childrenUnknown {
		// Nothing was read this time: the children's conditions keep what they said.
		ctlOK, ctlMsg = meta.IsStatusConditionTrue(st.Conditions, slurmv1alpha1.ConditionControllerAvailable), "the children could not be read"
	} else {
		set(slurmv1alpha1.ConditionControllerAvailable, ctlOK, ctlReason, ctlMsg)
		wOK, wReason, wMsg := statefulSetCondition(o.worker, "worker")
		// A pod of any set that cannot start, or that Kubernetes refused to create, means a
		// set cannot reach its size (an elastic one cannot grow), even while the default
		// set's pods are all ready.
		if cannot := cannotStartWorkers(sc, o); len(cannot) > 0 {
			named := cannot[:min(len(cannot), maxNamedPending)]
			wOK, wReason, wMsg = false, slurmv1alpha1.ReasonWorkerPodsPending, wMsg+"; "+strings.Join(named, "; ")
			if len(o.pendingWorkers) == 0 {
				wReason = slurmv1alpha1.ReasonWorkerPodsRefused
			}
			if more := len(cannot) - len(named); more > 0 {
				wMsg += fmt.Sprintf("; and %d more", more)
			}
		}
		if !wOK && len(o.unhealthyNodeWorkers) > 0 {
			if wReason != slurmv1alpha1.ReasonWorkerPodsPending && wReason != slurmv1alpha1.ReasonWorkerPodsRefused {
				wReason = slurmv1alpha1.ReasonWorkerNodeUnhealthy
			}
			wMsg += "; " + strings.Join(o.unhealthyNodeWorkers, "; ")
		}
		set(slurmv1alpha1.ConditionWorkersAvailable, wOK, wReason, wMsg)
		lOK, lReason, lMsg := statefulSetCondition(o.login, "login")
		set(slurmv1alpha1.ConditionLoginAvailable, lOK, lReason, lMsg)
	}

	switch {
	case o.childrenUnknown && nodes.Accounting.Enabled && o.databaseErr == "":
	case !nodes.Accounting.Enabled:
		set(slurmv1alpha1.ConditionAccountingAvailable, true, slurmv1alpha1.ReasonDisabled, "accounting is not enabled (spec.slurmNodes.accounting.enabled)")
	case o.databaseErr != "":
		set(slurmv1alpha1.ConditionAccountingAvailable, false, o.databaseReason, o.databaseErr)
	case nodes.Accounting.MariadbOperator != nil && nodes.Accounting.MariadbOperator.Enabled && !o.mariaDBAPI:
		set(slurmv1alpha1.ConditionAccountingAvailable, false, slurmv1alpha1.ReasonMariaDBOperatorMissing, "the k8s.mariadb.com API is not served: install mariadb-operator, or use spec.slurmNodes.accounting.externalDB")
	default:
		ok, reason, msg := statefulSetCondition(o.accounting, "slurmdbd")
		set(slurmv1alpha1.ConditionAccountingAvailable, ok, reason, msg)
	}

	switch {
	case o.childrenUnknown && sc.Spec.PopulateJail != nil && sc.Spec.PopulateJail.Image != "":
	case sc.Spec.PopulateJail == nil || sc.Spec.PopulateJail.Image == "":
		set(slurmv1alpha1.ConditionJailPopulated, true, slurmv1alpha1.ReasonNotManaged, "spec.populateJail is unset: the jail volume is used as it is")
	case o.jailHeld != "":
		set(slurmv1alpha1.ConditionJailPopulated, false, slurmv1alpha1.ReasonOverwriteWaiting, o.jailHeld)
	case o.populateJob == nil:
		set(slurmv1alpha1.ConditionJailPopulated, false, slurmv1alpha1.ReasonJobPending, "the populate Job has not been created yet")
	case jobSucceeded(o.populateJob):
		set(slurmv1alpha1.ConditionJailPopulated, true, slurmv1alpha1.ReasonPopulated, "the populate Job completed")
	case jobFinished(o.populateJob):
		set(slurmv1alpha1.ConditionJailPopulated, false, slurmv1alpha1.ReasonJobFailed, "the populate Job failed: kubectl logs job/"+o.populateJob.Name)
	default:
		set(slurmv1alpha1.ConditionJailPopulated, false, slurmv1alpha1.ReasonPopulating, "the populate Job is running")
	}

	// Degraded names what went wrong, the most fundamental first: its reason is the first's.
	var problems, reasons []string
	add := func(reason, msg string) { reasons, problems = append(reasons, reason), append(problems, msg) }
	renderReason := o.renderReason
	if renderReason == "" {
		renderReason = slurmv1alpha1.ReasonRenderFailed
	}
	if o.renderErr != nil {
		add(renderReason, o.renderErr.Error())
	}
	if o.phaseErr != nil {
		add(slurmv1alpha1.ReasonReconcileFailed, o.phaseErr.Error())
	}
	if len(o.renderWarnings) > 0 {
		add(slurmv1alpha1.ReasonSpecValueNotUsed, strings.Join(o.renderWarnings, "; "))
	}
	if len(o.applyErrs) > 0 {
		add(slurmv1alpha1.ReasonApplyFailed, "the API server refused "+strings.Join(o.applyErrs, "; "))
	}
	if len(o.stateUnreadable) > 0 {
		add(slurmv1alpha1.ReasonControllerStateUnreadable, stateUnreadableMessage(o.stateUnreadable))
	}
	if len(o.stranded) > 0 {
		var lost []string
		for _, sp := range o.stranded {
			lost = append(lost, sp.String())
		}
		add(slurmv1alpha1.ReasonWorkerNodeLost, "worker pods stranded on lost Kubernetes nodes (bring the node back, or taint it node.kubernetes.io/out-of-service): "+strings.Join(lost, "; "))
	}
	if o.identityErr != "" {
		add(o.identityReason, o.identityErr+"; the pods keep the configuration they have")
	}
	if o.priorityClassMissing != "" {
		add(slurmv1alpha1.ReasonPriorityClassMissing, o.priorityClassMissing)
	}
	if nodes.Exporter.Enabled && !o.serviceMonitorAPI && o.renderErr == nil && o.phaseErr == nil {
		add(slurmv1alpha1.ReasonOptionalAPIMissing, "no ServiceMonitor: the monitoring.coreos.com API is not served")
	}
	if len(problems) > 0 {
		set(slurmv1alpha1.ConditionDegraded, true, reasons[0], strings.Join(problems, "; "))
	} else {
		set(slurmv1alpha1.ConditionDegraded, false, slurmv1alpha1.ReasonAsExpected, "")
	}

	jailOK := meta.IsStatusConditionTrue(st.Conditions, slurmv1alpha1.ConditionJailPopulated)
	switch {
	case o.renderErr != nil:
		set(slurmv1alpha1.ConditionAvailable, false, renderReason, o.renderErr.Error())
	case o.childrenUnknown:
		// Keeps what it said.
	case !ctlOK && len(o.stateUnreadable) > 0:
		set(slurmv1alpha1.ConditionAvailable, false, slurmv1alpha1.ReasonControllerStateUnreadable, ctlMsg)
	case !ctlOK:
		set(slurmv1alpha1.ConditionAvailable, false, slurmv1alpha1.ReasonControllerUnavailable, ctlMsg)
	case !jailOK:
		set(slurmv1alpha1.ConditionAvailable, false, slurmv1alpha1.ReasonJailNotPopulated, "waiting for the jail to be populated")
	case o.worker == nil || o.worker.Status.ReadyReplicas == 0 && nodes.Worker.Size > 0 && !nodes.Worker.Elastic():
		set(slurmv1alpha1.ConditionAvailable, false, slurmv1alpha1.ReasonNoWorkerReady, "no worker is ready yet")
	default:
		set(slurmv1alpha1.ConditionAvailable, true, slurmv1alpha1.ReasonClusterReady, "slurmctld is up and workers are ready")
	}

	st.Workers.Desired = nodes.Worker.Size
	if nodes.Worker.Elastic() {
		// Slurm sizes the set: the pods it has powered up (or wants) are the desired count.
		st.Workers.Desired = o.scaling.pods[slurmv1alpha1.DefaultNodeSet]
	}
	if !o.childrenUnknown {
		st.Workers.Replicas, st.Workers.Ready = 0, 0
	}
	if o.worker != nil {
		st.Workers.Replicas = o.worker.Status.Replicas
		st.Workers.Ready = o.worker.Status.ReadyReplicas
	}
	st.Workers.Summary = fmt.Sprintf("%d/%d", st.Workers.Ready, st.Workers.Desired)
	if !o.childrenUnknown {
		st.NodeSets = nil
		for _, ws := range sc.WorkerSets()[1:] {
			ns := slurmv1alpha1.NodeSetStatus{Name: ws.Name, Desired: ws.Worker.Size}
			if ws.Worker.Elastic() {
				ns.Desired = o.scaling.pods[ws.Name]
			}
			if sts := o.nodeSets[ws.Name]; sts != nil {
				ns.Replicas, ns.Ready = sts.Status.Replicas, sts.Status.ReadyReplicas
			}
			st.NodeSets = append(st.NodeSets, ns)
		}
	}
	st.Workers.Selector = labels.SelectorFromSet(base.SelectorLabels(sc, slurmv1alpha1.ComponentWorker)).String()
	if !o.childrenUnknown {
		st.LoginEndpoint = loginEndpoint(o.loginService)
	}
	if o.gpu.Reason != "" { // else the nodes could not be read
		consistent, reason, msg := o.gpu.Consistent, o.gpu.Reason, o.gpu.Message
		for _, ws := range sc.WorkerSets()[1:] {
			g, ok := o.setGPUs[ws.Name]
			if !ok {
				continue
			}
			msg += "; node set " + ws.Name + ": " + g.Message
			if consistent && !g.Consistent {
				consistent, reason = false, g.Reason
			}
		}
		set(slurmv1alpha1.ConditionGPUShape, consistent, reason, msg)
	}
	// A reconcile that stopped before deciding keeps what these said: the scale-down's grace
	// period runs from ScalingDown's last transition, and a cancelled scale-down or a finished
	// update lifts the operator's drains only after a True.
	switch {
	case !o.scalingDecided:
	case o.scaling.active:
		set(slurmv1alpha1.ConditionScalingDown, true, o.scaling.reason, o.scaling.message)
	case meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionScalingDown) != nil:
		set(slurmv1alpha1.ConditionScalingDown, false, slurmv1alpha1.ReasonDone, "no scale-down in progress")
	}
	switch {
	case !o.rolloutDecided:
	case o.rollout.active:
		set(slurmv1alpha1.ConditionWorkersUpdating, true, o.rollout.reason, o.rollout.message)
	case meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionWorkersUpdating) != nil:
		set(slurmv1alpha1.ConditionWorkersUpdating, false, slurmv1alpha1.ReasonAllUpToDate, "every worker pod runs the current template")
	}
	switch {
	case !o.upgradeDecided:
	case o.upgrade.active:
		set(slurmv1alpha1.ConditionSlurmUpgrading, true, o.upgrade.reason, o.upgrade.message)
	case meta.FindStatusCondition(st.Conditions, slurmv1alpha1.ConditionSlurmUpgrading) != nil:
		set(slurmv1alpha1.ConditionSlurmUpgrading, false, slurmv1alpha1.ReasonDone, "no change of Slurm release waits")
	}
	if o.slurmReached {
		c := slurm.Count(o.slurmNodes)
		st.Workers.Idle, st.Workers.Allocated, st.Workers.Drained = c.Idle, c.Allocated, c.Drained
		st.Workers.OutOfService = outOfService(o.slurmNodes)
		for i, n := range st.Workers.OutOfService {
			if at, ok := o.nextCheck[n.Name]; ok {
				next := metav1.NewTime(at.Truncate(time.Second))
				st.Workers.OutOfService[i].NextCheck = &next
			}
		}
	}
	if o.checksDecided {
		st.ActiveChecks = o.activeChecks
	}
	switch n := o.gpu.GPU.Total(); {
	case o.gpu.Reason == "":
		// The nodes could not be read: the shape stays as it was.
	case n > 0:
		st.GPU = &slurmv1alpha1.GPUShape{PerWorker: n, Type: o.gpu.GPU.Type, Product: o.gpu.Product, Source: o.gpu.Source}
	default:
		st.GPU = nil
	}
	// The status speaks of this generation on every path; when it could not be carried out,
	// Degraded (and Available) say why.
	st.ObservedGeneration = sc.Generation
	return st
}

func statefulSetCondition(s *appsv1.StatefulSet, what string) (bool, string, string) {
	if s == nil {
		return false, slurmv1alpha1.ReasonNotCreated, what + " StatefulSet does not exist yet"
	}
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	msg := fmt.Sprintf("%d/%d %s pods ready", s.Status.ReadyReplicas, want, what)
	if statefulSetReady(s) {
		return true, slurmv1alpha1.ReasonAllReady, msg
	}
	if s.Status.ReadyReplicas > 0 {
		return false, slurmv1alpha1.ReasonPartiallyReady, msg
	}
	return false, slurmv1alpha1.ReasonNotReady, msg
}

func loginEndpoint(svc *corev1.Service) string {
	if svc == nil {
		return ""
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			return ing.IP
		}
		if ing.Hostname != "" {
			return ing.Hostname
		}
	}
	if svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return svc.Spec.ClusterIP
	}
	return ""
}

// updateStatus writes the status when it changed, and emits an event for each condition that
// changed state. An unchanged status is not written.
func (r *SlurmClusterReconciler) updateStatus(ctx context.Context, sc *slurmv1alpha1.SlurmCluster, desired *slurmv1alpha1.SlurmCluster, o *observed) error {
	next := computeStatus(desired, sc.Status, o)
	observeCluster(desired, next, o, time.Now())
	if equality.Semantic.DeepEqual(next, sc.Status) {
		return nil
	}
	r.conditionEvents(sc, sc.Status.Conditions, next.Conditions)
	patch := client.MergeFrom(sc.DeepCopy())
	// The versions the cache may show until it shows this write: the one read, and, when the
	// read one was already behind an earlier write of ours, those that write left behind.
	before := map[string]bool{sc.ResourceVersion: true}
	if w, ok := r.statusWritten.Load(client.ObjectKeyFromObject(sc)); ok && w.(writtenStatus).uid == sc.UID && w.(writtenStatus).before[sc.ResourceVersion] {
		for v := range w.(writtenStatus).before {
			before[v] = true
		}
		before[w.(writtenStatus).after] = true
	}
	sc.Status = next
	if err := r.Status().Patch(ctx, sc, patch); err != nil {
		return err
	}
	r.statusWritten.Store(client.ObjectKeyFromObject(sc), writtenStatus{uid: sc.UID, before: before, after: sc.ResourceVersion, status: next})
	return nil
}

// writtenStatus is the status the operator last wrote on a SlurmCluster: the resourceVersions
// of the object before that write (which a lagging cache may still show), and after it.
type writtenStatus struct {
	uid    types.UID
	before map[string]bool
	after  string
	status slurmv1alpha1.SlurmClusterStatus
}

// ownStatus puts into a SlurmCluster read from the cache the status this operator last wrote
// on it, when the cache still shows the object that status was written on: the write is on its
// way to the cache. Without it, a reconcile in between would take the old status for the
// current one, write the same status again and record its condition changes twice.
func (r *SlurmClusterReconciler) ownStatus(sc *slurmv1alpha1.SlurmCluster) {
	if w, ok := r.statusWritten.Load(client.ObjectKeyFromObject(sc)); ok {
		if w := w.(writtenStatus); w.uid == sc.UID && w.before[sc.ResourceVersion] {
			sc.Status = *w.status.DeepCopy()
		}
	}
}

// DefaultStatusSettle is how long the manager holds a status write for a StatefulSet it just
// changed to report on the change (see statusSettling).
const DefaultStatusSettle = 3 * time.Second

// statusSettling reports how much longer the status write waits: while a StatefulSet the
// operator changed less than StatusSettle ago has not reported on that change yet (its
// status.observedGeneration is behind, or its pods are still being made or removed), the status would be written now and again a moment
// later with the StatefulSet's answer. Waiting writes it once; the StatefulSet's report
// brings the next reconcile, and the wait never exceeds StatusSettle.
func (r *SlurmClusterReconciler) statusSettling(o *observed, now time.Time) time.Duration {
	if r.StatusSettle <= 0 || o.troubled() {
		return 0
	}
	var wait time.Duration
	for _, s := range o.statefulSets() {
		if s == nil || s.Status.ObservedGeneration >= s.Generation && s.Spec.Replicas != nil && s.Status.Replicas == *s.Spec.Replicas {
			continue
		}
		ours, _ := writeTimes(s)
		// managedFields times have a resolution of one second.
		if left := ours.Add(r.StatusSettle + time.Second).Sub(now); left > wait && left <= r.StatusSettle+time.Second {
			wait = left
		}
	}
	return wait
}

// maxOutOfServiceShown bounds status.workers.outOfService (its CRD's MaxItems).
const maxOutOfServiceShown = 32

// outOfService lists the nodes Slurm holds out of service, in Slurm's order (its node list's), with their reasons, who
// set them and since when; nil when none is.
func outOfService(nodes []slurm.Node) []slurmv1alpha1.NodeOutOfService {
	var out []slurmv1alpha1.NodeOutOfService
	for _, n := range nodes {
		state := slurm.NodeState(n)
		if !slurm.OutOfService(state) {
			continue
		}
		e := slurmv1alpha1.NodeOutOfService{Name: n.Name, State: state, Reason: n.ShownReason(), SetBy: slurm.ReasonOwner(n, state)}
		if n.ReasonAt.Set && n.ReasonAt.Number > 0 {
			since := metav1.Unix(n.ReasonAt.Number, 0)
			e.Since = &since
		}
		out = append(out, e)
	}
	if len(out) > maxOutOfServiceShown {
		out = out[:maxOutOfServiceShown]
	}
	return out
}
