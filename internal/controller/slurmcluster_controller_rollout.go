package controller

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// rollout is what the worker update phase found.
type rollout struct {
	active          bool
	reason, message string
}

// rollWorkers replaces worker pods that run an old pod template. The worker StatefulSet uses
// the OnDelete strategy, so Kubernetes never replaces a worker by itself; here each outdated
// worker's node is drained in Slurm (reason slurmfacts.DrainUpdate), and its pod is deleted
// only once the node is drained and idle, or down. At most updateStrategy.maxUnavailable
// workers (a tenth when unset, at least one) are draining or replaced at a time, idle ones
// first; a replacement lasts until its new pod is ready, the time before the StatefulSet makes
// that pod included. When a replaced pod is ready again, the operator's update drain is lifted;
// an admin's drain stays. When Slurm cannot be asked, nothing is deleted.
func (r *SlurmClusterReconciler) rollWorkers(ctx context.Context, s *reconcileScope) (err error) {
	sc, o := s.desired, s.facts
	defer func() { o.rolloutDecided = err == nil }()
	pods, err := r.podsOf(ctx, sc, slurmv1alpha1.ComponentWorker)
	if err != nil {
		return fmt.Errorf("list worker pods: %w", err)
	}
	var messages []string
	for _, set := range sc.WorkerSets() {
		sts := o.worker
		if !set.Default() {
			sts = o.nodeSets[set.Name]
		}
		if sts == nil || sts.Status.UpdateRevision == "" {
			continue
		}
		ro, err := r.rollSet(ctx, s, set, sts, podsOfSet(pods.Items, set.Name))
		if err != nil {
			return err
		}
		if ro.active {
			if !o.rollout.active {
				o.rollout = ro
			}
			messages = append(messages, ro.message)
		}
	}
	if len(messages) > 1 {
		o.rollout.message = strings.Join(messages, "; ")
	}
	return nil
}

// rollSet is rollWorkers for one worker set: its StatefulSet and its pods.
func (r *SlurmClusterReconciler) rollSet(ctx context.Context, s *reconcileScope, set slurmv1alpha1.WorkerSet, sts *appsv1.StatefulSet, pods []corev1.Pod) (rollout, error) {
	sc, prev, o := s.desired, &s.cluster.Status, s.facts
	var outdated, current []corev1.Pod
	inFlight := 0
	stranded := o.strandedNames()
	// The nodes that have a pod, whatever its state: a node drained for its update that has
	// none is between its old pod's removal and its new one's creation.
	hasPod := map[string]bool{}
	for _, p := range pods {
		hasPod[slurmName(p)] = true
		switch {
		case stranded[p.Name]:
			// Its node is lost: no replacement is in flight, and none can be until the node
			// is back or declared out of service. Other workers' updates go on.
		case !p.DeletionTimestamp.IsZero():
			inFlight++
		case p.Labels[appsv1.ControllerRevisionHashLabelKey] != sts.Status.UpdateRevision:
			outdated = append(outdated, p)
		default:
			current = append(current, p)
		}
	}
	wasActive := meta.IsStatusConditionTrue(prev.Conditions, slurmv1alpha1.ConditionWorkersUpdating)
	if len(outdated) == 0 && !wasActive {
		return rollout{}, nil
	}
	api := r.slurmFor(s)
	nodes, err := api.Nodes(ctx)
	if err != nil {
		return rollout{active: true, reason: slurmErrorReason(err),
			message: fmt.Sprintf("%d worker pods run an old template; none is replaced (and no update drain lifted) until Slurm can be asked: %v", len(outdated), err)}, nil
	}
	o.slurmNodes, o.slurmReached = nodes, true
	byName := map[string]slurm.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	// Lift the update drain of nodes whose new pod is ready; the others are on their way (their
	// pod is being deleted, recreated or started) and keep the rollout open.
	currentByNode := map[string]corev1.Pod{}
	for _, p := range current {
		currentByNode[slurmName(p)] = p
	}
	var starting []string
	for _, n := range nodes {
		if !n.OwnedDrain() || n.Reason != slurmfacts.DrainUpdate {
			continue
		}
		if of, _, ok := splitNodeName(sc, n.Name); !ok || of.Name != set.Name {
			continue
		}
		p, ok := currentByNode[n.Name]
		if !ok || !podReady(p) {
			if withinSize(sc, n.Name) {
				starting = append(starting, n.Name)
				// Drained for its update, and its new pod not ready, or not made yet (between
				// the old pod's removal and the StatefulSet's new one): the replacement is in
				// flight, so the next one waits for it. A pod being deleted is counted above,
				// an outdated one waiting for its jobs below.
				if ok || !hasPod[n.Name] {
					inFlight++
				}
			}
			continue
		}
		if _, err := api.ResumeIfOwned(ctx, n.Name); err != nil {
			return rollout{}, fmt.Errorf("resume %s after its update: %w", n.Name, err)
		}
	}
	if len(outdated) == 0 {
		if len(starting) > 0 {
			return rollout{active: true, reason: slurmv1alpha1.ReasonResumingNodes,
				message: "waiting for the replaced pods of " + strings.Join(starting, ", ") + " to be ready before returning them to service"}, nil
		}
		return rollout{}, nil
	}

	var outdatedNames []string
	for _, p := range outdated {
		outdatedNames = append(outdatedNames, slurmName(p))
	}
	if missing := slurm.Missing(nodes, outdatedNames); len(missing) > 0 {
		return rollout{active: true, reason: slurmv1alpha1.ReasonSlurmAnswerIncomplete,
			message: fmt.Sprintf("%d worker pods run an old template; none is replaced while slurmctld's answer lacks %s, which may run jobs", len(outdated), strings.Join(missing, ", "))}, nil
	}

	maxInFlight := maxUnavailable(set.Worker)
	// Idle nodes first, then the highest ordinal.
	sort.SliceStable(outdated, func(i, j int) bool {
		bi, bj := byName[slurmName(outdated[i])].Busy(), byName[slurmName(outdated[j])].Busy()
		if bi != bj {
			return !bi
		}
		return ordinal(outdated[i]) > ordinal(outdated[j])
	})
	var waiting []string
	for _, p := range outdated {
		name := slurmName(p)
		n, known := byName[name]
		if known && n.Has("DRAIN") && !n.Drained() && !(n.Down() && !n.Busy()) {
			waiting = append(waiting, name)
			if n.Reason == slurmfacts.DrainUpdate {
				inFlight++
			}
		}
	}
	for _, p := range outdated {
		name := slurmName(p)
		n, known := byName[name]
		switch {
		case !known || n.Drained() || (n.Down() && !n.Busy()):
			if inFlight >= maxInFlight {
				continue
			}
			log.FromContext(ctx).Info("replacing an outdated worker pod whose node is drained", "pod", p.Name, "node", name)
			if err := r.Delete(ctx, &p); client.IgnoreNotFound(err) != nil {
				return rollout{}, fmt.Errorf("delete outdated pod %s: %w", p.Name, err)
			}
			inFlight++
		case !n.Has("DRAIN"):
			if inFlight >= maxInFlight {
				continue
			}
			if err := api.Drain(ctx, name, slurmfacts.DrainUpdate); err != nil {
				return rollout{}, fmt.Errorf("drain %s for its update: %w", name, err)
			}
			waiting = append(waiting, name)
			inFlight++
		}
	}
	msg := fmt.Sprintf("%d of %d worker pods%s run an old template; replacing at most %d at a time, each once its node is drained", len(outdated), len(pods), setSuffix(set), maxInFlight)
	if len(waiting) > 0 {
		msg += "; waiting for the jobs on " + strings.Join(waiting, ", ")
	}
	return rollout{active: true, reason: slurmv1alpha1.ReasonReplacingPods, message: msg}, nil
}

// setSuffix names a node set in a message about its workers ("" for spec.slurmNodes.worker).
func setSuffix(set slurmv1alpha1.WorkerSet) string {
	if set.Default() {
		return ""
	}
	return " of node set " + set.Name
}

// maxUnavailable is how many workers an update may drain or replace at once:
// updateStrategy.maxUnavailable (a number, or a percentage of the size rounded down), a tenth
// of the size when unset, and never less than one.
func maxUnavailable(w slurmv1alpha1.Worker) int {
	v := intstr.FromString("10%")
	if w.UpdateStrategy.MaxUnavailable != nil {
		v = *w.UpdateStrategy.MaxUnavailable
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, int(w.Size), false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// ordinal is a pod's index in its StatefulSet.
func ordinal(p corev1.Pod) int {
	if v, ok := p.Labels[base.LabelPodIndex]; ok {
		if i, err := strconv.Atoi(v); err == nil {
			return i
		}
	}
	i, _ := strconv.Atoi(p.Name[strings.LastIndex(p.Name, "-")+1:])
	return i
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
