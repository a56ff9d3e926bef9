package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// AnnotationAppliedHash on a child is the hash of what the operator last applied to it. A
// child whose hash matches the desired object is not applied again, so a reconcile that
// changes nothing makes no write.
const AnnotationAppliedHash = "slurm.hpc.dev/applied-hash"

// applyAll applies every rendered object that is missing or differs from what was applied last.
func (r *SlurmClusterReconciler) applyAll(ctx context.Context, owner *slurmv1alpha1.SlurmCluster, parts []render.Part) error {
	for _, p := range parts {
		for _, obj := range p.Objects {
			if err := r.apply(ctx, owner, obj); err != nil {
				return fmt.Errorf("apply %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
			}
		}
	}
	return nil
}

func (r *SlurmClusterReconciler) apply(ctx context.Context, owner *slurmv1alpha1.SlurmCluster, obj client.Object) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if err := controllerutil.SetControllerReference(owner, obj, r.Scheme); err != nil {
		return err
	}
	hash, err := objectHash(obj)
	if err != nil {
		return err
	}
	// Read through the cache: a typed object for kinds the scheme knows, unstructured otherwise.
	var live client.Object
	if typed, err := r.Scheme.New(gvk); err == nil {
		live = typed.(client.Object)
	} else {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		live = u
	}
	found, err := r.getOptional(ctx, client.ObjectKeyFromObject(obj), live)
	if err != nil {
		return err
	}
	if found && live.GetAnnotations()[AnnotationAppliedHash] == hash {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	desired := &unstructured.Unstructured{Object: u}
	desired.SetGroupVersionKind(gvk)
	ann := desired.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationAppliedHash] = hash
	desired.SetAnnotations(ann)
	unstructured.RemoveNestedField(desired.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(desired.Object, "status")
	log.FromContext(ctx).V(1).Info("applying", "kind", gvk.Kind, "name", obj.GetName(), "created", !found)
	return r.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(base.ManagedBy), client.ForceOwnership)
}

// objectHash hashes the object as it will be applied (owner references included).
func objectHash(obj client.Object) (string, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", obj.GetName(), err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:20], nil
}
