package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// AnnotationAppliedHash on a child is the hash of what the operator last applied to it. A
// child whose hash matches the desired object is not applied again, so a reconcile that
// changes nothing makes no write.
const AnnotationAppliedHash = "slurm.hpc.dev/applied-hash"

// applyAll applies every rendered object that is missing or differs from what was applied last.
// Each object is applied on its own: one the API server refuses (an immutable field changed, a
// ConfigMap over its size limit) is named in the status, and stops neither the other objects
// nor the phases after this one. Only a conflict (a stale cache) is returned, to retry soon.
func (r *SlurmClusterReconciler) applyAll(ctx context.Context, s *reconcileScope) error {
	var conflict error
	for _, p := range s.parts {
		for _, obj := range p.Objects {
			applied, written, err := r.apply(ctx, s.cluster, obj)
			switch {
			case err == nil:
				s.remember(applied)
				if written {
					s.noteWritten(obj)
				}
			case apierrors.IsConflict(err):
				conflict = err
			default:
				kind := obj.GetObjectKind().GroupVersionKind().Kind
				log.FromContext(ctx).Error(err, "apply failed", "kind", kind, "name", obj.GetName())
				s.facts.applyErrs = append(s.facts.applyErrs, fmt.Sprintf("%s %s: %s", kind, obj.GetName(), apiMessage(err)))
			}
		}
	}
	return conflict
}

// apiMessage is what the API server said, without the client's wrapping.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// apply writes one child with server-side apply, unless it is as desired already. It returns
// the child as the API server answered, when it was applied or read from the API server (nil
// when the cache's copy was enough), and whether it wrote it.
func (r *SlurmClusterReconciler) apply(ctx context.Context, owner *slurmv1alpha1.SlurmCluster, obj client.Object) (*unstructured.Unstructured, bool, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if err := controllerutil.SetControllerReference(owner, obj, r.Scheme); err != nil {
		return nil, false, err
	}
	hash, err := objectHash(obj)
	if err != nil {
		return nil, false, err
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
	key := client.ObjectKeyFromObject(obj)
	found, err := r.getOptional(ctx, key, live)
	if err != nil {
		return nil, false, err
	}
	// seen is the object as the API server answered, when it was asked (not through the cache).
	var seen *unstructured.Unstructured
	if !found && r.justCreated(gvk, key, hash) {
		// The cache has not seen a create this operator made a moment ago: ask the API server
		// rather than apply it a second time.
		if err := r.APIReader.Get(ctx, key, live); err == nil {
			found = true
			// Observed as the API server has it, not as the lagging cache does.
			if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live); err == nil {
				seen = &unstructured.Unstructured{Object: u}
				seen.SetGroupVersionKind(gvk)
			}
		} else if !apierrors.IsNotFound(err) {
			return nil, false, err
		}
	}
	if found && live.GetAnnotations()[AnnotationAppliedHash] == hash && (isKeySecret(owner, live) || !r.editedByOthers(live)) && !scaledByOthers(obj, live) {
		return seen, false, nil
	}
	if _, job := live.(*batchv1.Job); found && job {
		// A Job's template cannot change, and a Job that ran does not run again: a new one is
		// made when its name changes (a new image, an overwrite), never an edit of this one.
		return nil, false, nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, false, err
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
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(base.ManagedBy), client.ForceOwnership); err != nil {
		return nil, false, err
	}
	// desired now holds the object as the API server stored it.
	r.applied.Store(desired.GetUID(), desired.GetResourceVersion())
	if !found {
		r.created.Store(createdKey(gvk, key), createdAt{hash: hash, at: time.Now()})
	}
	return desired, true, nil
}

// scaledByOthers reports whether a StatefulSet or Deployment has other replicas than desired, as
// `kubectl scale` leaves it: a write through the scale subresource may leave no managed-fields
// entry of its own (editedByOthers cannot see it), and an operator started after it would keep
// slurmctld or slurmdbd at the count someone else set.
func scaledByOthers(desired, live client.Object) bool {
	switch d := desired.(type) {
	case *appsv1.StatefulSet:
		l, ok := live.(*appsv1.StatefulSet)
		return ok && !ptr.Equal(d.Spec.Replicas, l.Spec.Replicas)
	case *appsv1.Deployment:
		l, ok := live.(*appsv1.Deployment)
		return ok && !ptr.Equal(d.Spec.Replicas, l.Spec.Replicas)
	}
	return false
}

// isKeySecret reports whether obj is one of the cluster's key Secrets. Their content is the
// truth the operator reads keys from (an admin restores a key by writing it there), so an
// edit to them is never undone.
func isKeySecret(sc *slurmv1alpha1.SlurmCluster, obj client.Object) bool {
	if _, ok := obj.(*corev1.Secret); !ok {
		return false
	}
	switch obj.GetName() {
	case sc.MungeKeySecretName(), sc.JWTKeySecretName(), sc.SSHHostKeysSecretName(), sc.DatabasePasswordSecretName():
		return true
	}
	return false
}

// editedByOthers reports whether someone other than the operator wrote the object (its main
// resource or its scale, not its status) since the operator last applied it, so that the
// fields the operator owns may have drifted: kubectl edit, scale or patch on a StatefulSet, a
// ConfigMap or a Service. Applying again (with ownership forced) restores those fields and
// leaves the others' own fields alone; when nothing drifted that apply changes nothing, and the
// object's version is remembered so that it is not applied again until someone writes it.
func (r *SlurmClusterReconciler) editedByOthers(live client.Object) bool {
	if v, ok := r.applied.Load(live.GetUID()); ok && v == live.GetResourceVersion() {
		return false
	}
	ours, others := writeTimes(live)
	// Times have a resolution of one second: an edit in the second of the last apply counts.
	return !others.IsZero() && !others.Before(ours)
}

// createdAt is when the operator created an object, and the hash it created it with.
type createdAt struct {
	hash string
	at   time.Time
}

func createdKey(gvk schema.GroupVersionKind, key client.ObjectKey) string {
	return gvk.String() + "/" + key.String()
}

// justCreated reports whether the operator created this object, as it is now desired, less than
// a minute ago.
func (r *SlurmClusterReconciler) justCreated(gvk schema.GroupVersionKind, key client.ObjectKey, hash string) bool {
	if r.APIReader == nil {
		return false
	}
	v, ok := r.created.Load(createdKey(gvk, key))
	return ok && v.(createdAt).hash == hash && time.Since(v.(createdAt).at) < time.Minute
}

// forgetOldCreates drops what justCreated no longer needs, at most once a minute.
func (r *SlurmClusterReconciler) forgetOldCreates(now time.Time) {
	last, _ := r.createdSwept.Load().(time.Time)
	if now.Sub(last) < time.Minute || !r.createdSwept.CompareAndSwap(r.createdSwept.Load(), now) {
		return
	}
	r.created.Range(func(k, v any) bool {
		if now.Sub(v.(createdAt).at) >= time.Minute {
			r.created.CompareAndDelete(k, v)
		}
		return true
	})
}

// writeTimes are when the operator last wrote the object (not its status), and when anyone
// else last did, from its managedFields (one-second resolution).
func writeTimes(live client.Object) (ours, others time.Time) {
	for _, m := range live.GetManagedFields() {
		if m.Subresource == "status" || m.Time == nil {
			continue
		}
		t := m.Time.Time
		if m.Manager == base.ManagedBy {
			if t.After(ours) {
				ours = t
			}
		} else if t.After(others) {
			others = t
		}
	}
	return ours, others
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
