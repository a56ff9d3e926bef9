package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get

// checkSharedSpool halts a cluster with a backup controller whose spool is a claim that is not
// ReadWriteMany: the backup would take over from a StateSaveLocation the primary never wrote
// (or not start at all, its claim held by the other node). Admission already requires the
// spool to be a volume source; only the claim itself says how it may be mounted. The claim is
// read from the API server (the operator caches no claims), once per reconcile of such a
// cluster; a claim that does not exist yet is checked once it does (the pods wait for it).
func (r *SlurmClusterReconciler) checkSharedSpool(ctx context.Context, s *reconcileScope) error {
	sc := s.desired
	ctl := sc.Spec.SlurmNodes.Controller
	if ctl.Size < 2 || ctl.Volumes.Spool == nil || ctl.Volumes.Spool.VolumeSourceName == "" {
		return nil
	}
	i := slices.IndexFunc(sc.Spec.VolumeSources, func(v slurmv1alpha1.VolumeSource) bool {
		return v.Name == ctl.Volumes.Spool.VolumeSourceName
	})
	if i < 0 || sc.Spec.VolumeSources[i].PersistentVolumeClaim == nil {
		return nil
	}
	name := sc.Spec.VolumeSources[i].PersistentVolumeClaim.ClaimName
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		s.facts.renderErr = fmt.Errorf("spec.slurmNodes.controller.volumes.spool.volumeSourceName: claim %s has access modes %v, not ReadWriteMany: "+
			"with size 2 both slurmctld mount it, and the backup takes over from the state the primary saved there", name, pvc.Spec.AccessModes)
		s.facts.renderReason = slurmv1alpha1.ReasonSpoolNotShared
		return errHalt
	}
	return nil
}
