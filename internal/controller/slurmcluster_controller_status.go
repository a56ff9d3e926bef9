package controller

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// The condition types, from the API.
const (
	ConditionAvailable           = slurmv1alpha1.ConditionAvailable
	ConditionControllerAvailable = slurmv1alpha1.ConditionControllerAvailable
	ConditionWorkersAvailable    = slurmv1alpha1.ConditionWorkersAvailable
	ConditionLoginAvailable      = slurmv1alpha1.ConditionLoginAvailable
	ConditionAccountingAvailable = slurmv1alpha1.ConditionAccountingAvailable
	ConditionJailPopulated       = slurmv1alpha1.ConditionJailPopulated
	ConditionDegraded            = slurmv1alpha1.ConditionDegraded
	ConditionGPUShape            = slurmv1alpha1.ConditionGPUShape
	ConditionScalingDown         = slurmv1alpha1.ConditionScalingDown
	ConditionWorkersUpdating     = slurmv1alpha1.ConditionWorkersUpdating
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
	if o.childrenUnknown {
		// Nothing was read this time: the children's conditions keep what they said.
		ctlOK, ctlMsg = meta.IsStatusConditionTrue(st.Conditions, ConditionControllerAvailable), "the children could not be read"
	} else {
		set(ConditionControllerAvailable, ctlOK, ctlReason, ctlMsg)
		wOK, wReason, wMsg := statefulSetCondition(o.worker, "worker")
		set(ConditionWorkersAvailable, wOK, wReason, wMsg)
		lOK, lReason, lMsg := statefulSetCondition(o.login, "login")
		set(ConditionLoginAvailable, lOK, lReason, lMsg)
	}

	switch {
	case o.childrenUnknown && nodes.Accounting.Enabled && o.databaseErr == "":
	case !nodes.Accounting.Enabled:
		set(ConditionAccountingAvailable, true, "Disabled", "accounting is not enabled (spec.slurmNodes.accounting.enabled)")
	case o.databaseErr != "":
		set(ConditionAccountingAvailable, false, o.databaseReason, o.databaseErr)
	case nodes.Accounting.MariadbOperator != nil && nodes.Accounting.MariadbOperator.Enabled && !o.mariaDBAPI:
		set(ConditionAccountingAvailable, false, "MariaDBOperatorMissing", "the k8s.mariadb.com API is not served: install mariadb-operator, or use spec.slurmNodes.accounting.externalDB")
	default:
		ok, reason, msg := statefulSetCondition(o.accounting, "slurmdbd")
		set(ConditionAccountingAvailable, ok, reason, msg)
	}

	switch {
	case o.childrenUnknown && sc.Spec.PopulateJail != nil && sc.Spec.PopulateJail.Image != "":
	case sc.Spec.PopulateJail == nil || sc.Spec.PopulateJail.Image == "":
		set(ConditionJailPopulated, true, "NotManaged", "spec.populateJail is unset: the jail volume is used as it is")
	case o.jailHeld != "":
		set(ConditionJailPopulated, false, reasonOverwriteWaiting, o.jailHeld)
	case o.populateJob == nil:
		set(ConditionJailPopulated, false, "JobPending", "the populate Job has not been created yet")
	case jobSucceeded(o.populateJob):
		set(ConditionJailPopulated, true, "Populated", "the populate Job completed")
	case jobFinished(o.populateJob):
		set(ConditionJailPopulated, false, "JobFailed", "the populate Job failed: kubectl logs job/"+o.populateJob.Name)
	default:
		set(ConditionJailPopulated, false, "Populating", "the populate Job is running")
	}

	// Degraded names what went wrong, the most fundamental first: its reason is the first's.
	var problems, reasons []string
	add := func(reason, msg string) { reasons, problems = append(reasons, reason), append(problems, msg) }
	renderReason := o.renderReason
	if renderReason == "" {
		renderReason = "RenderFailed"
	}
	if o.renderErr != nil {
		add(renderReason, o.renderErr.Error())
	}
	if o.phaseErr != nil {
		add("ReconcileFailed", o.phaseErr.Error())
	}
	if len(o.applyErrs) > 0 {
		add("ApplyFailed", "the API server refused "+strings.Join(o.applyErrs, "; "))
	}
	if nodes.Exporter.Enabled && !o.serviceMonitorAPI && o.renderErr == nil && o.phaseErr == nil {
		add("OptionalAPIMissing", "no ServiceMonitor: the monitoring.coreos.com API is not served")
	}
	if len(problems) > 0 {
		set(ConditionDegraded, true, reasons[0], strings.Join(problems, "; "))
	} else {
		set(ConditionDegraded, false, "AsExpected", "")
	}

	jailOK := meta.IsStatusConditionTrue(st.Conditions, ConditionJailPopulated)
	switch {
	case o.renderErr != nil:
		set(ConditionAvailable, false, renderReason, o.renderErr.Error())
	case o.childrenUnknown:
		// Keeps what it said.
	case !ctlOK:
		set(ConditionAvailable, false, "ControllerUnavailable", ctlMsg)
	case !jailOK:
		set(ConditionAvailable, false, "JailNotPopulated", "waiting for the jail to be populated")
	case o.worker == nil || o.worker.Status.ReadyReplicas == 0 && nodes.Worker.Size > 0:
		set(ConditionAvailable, false, "NoWorkerReady", "no worker is ready yet")
	default:
		set(ConditionAvailable, true, "ClusterReady", "slurmctld is up and workers are ready")
	}

	st.Workers.Desired = nodes.Worker.Size
	if !o.childrenUnknown {
		st.Workers.Replicas, st.Workers.Ready = 0, 0
	}
	if o.worker != nil {
		st.Workers.Replicas = o.worker.Status.Replicas
		st.Workers.Ready = o.worker.Status.ReadyReplicas
	}
	st.Workers.Summary = fmt.Sprintf("%d/%d", st.Workers.Ready, st.Workers.Desired)
	st.Workers.Selector = labels.SelectorFromSet(base.SelectorLabels(sc, slurmv1alpha1.ComponentWorker)).String()
	if !o.childrenUnknown {
		st.LoginEndpoint = loginEndpoint(o.loginService)
	}
	if o.gpu.Reason != "" { // else the nodes could not be read
		set(ConditionGPUShape, o.gpu.Consistent, o.gpu.Reason, o.gpu.Message)
	}
	// A reconcile that stopped before deciding keeps what these said: the scale-down's grace
	// period runs from ScalingDown's last transition, and a cancelled scale-down or a finished
	// update lifts the operator's drains only after a True.
	switch {
	case !o.scalingDecided:
	case o.scaling.active:
		set(ConditionScalingDown, true, o.scaling.reason, o.scaling.message)
	case meta.FindStatusCondition(st.Conditions, ConditionScalingDown) != nil:
		set(ConditionScalingDown, false, "Done", "no scale-down in progress")
	}
	switch {
	case !o.rolloutDecided:
	case o.rollout.active:
		set(ConditionWorkersUpdating, true, o.rollout.reason, o.rollout.message)
	case meta.FindStatusCondition(st.Conditions, ConditionWorkersUpdating) != nil:
		set(ConditionWorkersUpdating, false, "AllUpToDate", "every worker pod runs the current template")
	}
	if o.slurmReached {
		c := slurm.Count(o.slurmNodes)
		st.Workers.Idle, st.Workers.Allocated, st.Workers.Drained = c.Idle, c.Allocated, c.Drained
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
		return false, "NotCreated", what + " StatefulSet does not exist yet"
	}
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	msg := fmt.Sprintf("%d/%d %s pods ready", s.Status.ReadyReplicas, want, what)
	if statefulSetReady(s) {
		return true, "AllReady", msg
	}
	if s.Status.ReadyReplicas > 0 {
		return false, "PartiallyReady", msg
	}
	return false, "NotReady", msg
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
	if equality.Semantic.DeepEqual(next, sc.Status) {
		return nil
	}
	for _, c := range next.Conditions {
		old := meta.FindStatusCondition(sc.Status.Conditions, c.Type)
		if old != nil && old.Status == c.Status {
			continue
		}
		if c.Type == ConditionDegraded && c.Status == metav1.ConditionFalse && old == nil {
			continue
		}
		eventType := corev1.EventTypeNormal
		if (c.Type == ConditionDegraded) == (c.Status == metav1.ConditionTrue) {
			eventType = corev1.EventTypeWarning
		}
		if r.Recorder != nil {
			r.Recorder.Eventf(sc, nil, eventType, c.Reason, "Reconcile", "%s is %s: %s", c.Type, c.Status, c.Message)
		}
	}
	patch := client.MergeFrom(sc.DeepCopy())
	sc.Status = next
	return r.Status().Patch(ctx, sc, patch)
}
