package controller

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// prune deletes the children a component that was turned off left behind (the exporter's
// Deployment, slurmdbd's StatefulSet and Service, an earlier populate Job). It only deletes
// objects this SlurmCluster controls and the current render does not hold. It never deletes
// Secrets (keys, passwords), PersistentVolumeClaims or mariadb-operator objects (deleting a
// MariaDB could take its data with it), never a Job that is still running, and nothing of the
// components in keep (parts this reconcile could not render, such as accounting without its
// database password).
func (r *SlurmClusterReconciler) prune(ctx context.Context, s *reconcileScope) error {
	sc, parts, keep := s.cluster, s.parts, s.keep
	desired := map[string]bool{}
	for _, p := range parts {
		for _, o := range p.Objects {
			desired[fmt.Sprintf("%T/%s", o, o.GetName())] = true
		}
	}
	lists := []client.ObjectList{&appsv1.StatefulSetList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &batchv1.JobList{}, &batchv1.CronJobList{}, &policyv1.PodDisruptionBudgetList{}, &networkingv1.NetworkPolicyList{}}
	for _, list := range lists {
		if err := r.List(ctx, list, client.InNamespace(sc.Namespace), client.MatchingLabels(base.ClusterLabels(sc))); err != nil {
			return fmt.Errorf("list children: %w", err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, it := range items {
			obj := it.(client.Object)
			if !controlledBy(obj, sc.UID) || desired[fmt.Sprintf("%T/%s", obj, obj.GetName())] {
				continue
			}
			if slices.Contains(keep, slurmv1alpha1.Component(obj.GetLabels()[base.LabelComponent])) {
				continue
			}
			if job, ok := obj.(*batchv1.Job); ok && !jobFinished(job) {
				continue
			}
			// A worker StatefulSet goes only once it has no pod: a node set that left the spec
			// is scaled to 0 first, its nodes drained (findLeavingNodeSets).
			if sts, ok := obj.(*appsv1.StatefulSet); ok && obj.GetLabels()[base.LabelComponent] == string(slurmv1alpha1.ComponentWorker) &&
				(sts.Status.Replicas > 0 || sts.Spec.Replicas == nil || *sts.Spec.Replicas > 0) {
				continue
			}
			log.FromContext(ctx).Info("deleting an object the spec no longer asks for", "kind", fmt.Sprintf("%T", obj), "name", obj.GetName())
			if err := r.Delete(ctx, obj, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete %s: %w", obj.GetName(), err)
			}
		}
	}
	return nil
}

func controlledBy(obj client.Object, uid types.UID) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.UID == uid && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}
