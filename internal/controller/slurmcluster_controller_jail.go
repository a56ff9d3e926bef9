package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render"
)

// holdJailOverwrite leaves the jail's objects out of this reconcile (not applied, not pruned)
// while an overwrite must wait, and says why in the status.
func (r *SlurmClusterReconciler) holdJailOverwrite(ctx context.Context, s *reconcileScope) error {
	held, err := r.jailOverwriteHold(ctx, s.cluster, s.desired)
	if err != nil || held == "" {
		return err
	}
	s.parts, s.facts.jailHeld = withoutComponent(s.parts, slurmv1alpha1.ComponentJail), held
	s.keep = append(s.keep, slurmv1alpha1.ComponentJail)
	return nil
}

// jailOverwriteHold says why an overwrite of a populated jail must wait, or "" when it may run:
// copying a new root over the jail while login and worker pods run in it would break their
// daemons, ssh sessions and jobs. The overwrite waits until the admin has scaled both to zero
// (a scale-down drains and waits for jobs) and their pods are gone. A first population, and an
// overwrite Job that already exists, never wait.
func (r *SlurmClusterReconciler) jailOverwriteHold(ctx context.Context, sc, desired *slurmv1alpha1.SlurmCluster) (string, error) {
	pj := desired.Spec.PopulateJail
	if pj == nil || pj.Image == "" || !pj.Overwrite {
		return "", nil
	}
	// Populated before: the condition is true, or says this very hold.
	c := meta.FindStatusCondition(sc.Status.Conditions, slurmv1alpha1.ConditionJailPopulated)
	if c == nil || (c.Status != metav1.ConditionTrue && c.Reason != slurmv1alpha1.ReasonOverwriteWaiting) {
		return "", nil
	}
	exists, err := r.getOptional(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: desired.PopulateJailJobName()}, &batchv1.Job{})
	if err != nil || exists {
		return "", err
	}
	// The pods a StatefulSet has or is making.
	podsOf := func(name string) (int32, error) {
		s := &appsv1.StatefulSet{}
		found, err := r.getOptional(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: name}, s)
		if err != nil || !found {
			return 0, err
		}
		n := s.Status.Replicas
		if s.Spec.Replicas != nil && *s.Spec.Replicas > n {
			n = *s.Spec.Replicas
		}
		return n, nil
	}
	var pods [2]int32 // workers of every set, login pods
	for _, set := range desired.WorkerSets() {
		n, err := podsOf(sc.WorkerSetStatefulSetName(set.Name))
		if err != nil {
			return "", err
		}
		pods[0] += n
	}
	n, err := podsOf(sc.ComponentName(slurmv1alpha1.ComponentLogin))
	if err != nil {
		return "", err
	}
	pods[1] = n
	if pods[0] == 0 && pods[1] == 0 {
		return "", nil
	}
	return fmt.Sprintf("the overwrite waits: %d worker and %d login pods run in the jail; scale spec.slurmNodes.worker.size, every node set's size and spec.slurmNodes.login.size to 0 first", pods[0], pods[1]), nil
}

// withoutComponent drops one component's objects from a render.
func withoutComponent(parts []render.Part, comp slurmv1alpha1.Component) []render.Part {
	out := make([]render.Part, 0, len(parts))
	for _, p := range parts {
		if p.Component != comp {
			out = append(out, p)
		}
	}
	return out
}
