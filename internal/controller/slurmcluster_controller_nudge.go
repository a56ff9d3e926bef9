package controller

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// AnnotationConfigSeen on a controller or login pod names the version of the ConfigMaps it
// mounts that the operator last told it about. Writing it makes the kubelet sync the pod at
// once, and with it the mounted ConfigMaps, which it otherwise refreshes only on its periodic
// sync (up to about a minute later): a new node list reaches slurmctld, and a new root key
// the login nodes, in seconds.
const AnnotationConfigSeen = "slurm.hpc.dev/config-seen"

// nudgeConfigReaders annotates the running controller and login pods with the version of the
// ConfigMaps they mount when it changed. A pod is nudged when this reconcile wrote one of its
// ConfigMaps, or when it was nudged before with an older version (a nudge a restart of the
// operator lost); a pod that never was is left alone otherwise: it mounted the ConfigMaps as
// they were when it started, so creating a cluster writes no pod. Workers are not nudged: they
// take their config from slurmctld.
func (r *SlurmClusterReconciler) nudgeConfigReaders(ctx context.Context, s *reconcileScope) error {
	sc := s.desired
	readers := map[slurmv1alpha1.Component][]string{
		slurmv1alpha1.ComponentController: {sc.ConfigMapName()},
		slurmv1alpha1.ComponentLogin:      {sc.ConfigMapName(), sc.AuthorizedKeysConfigMapName()},
	}
	for _, comp := range []slurmv1alpha1.Component{slurmv1alpha1.ComponentController, slurmv1alpha1.ComponentLogin} {
		version, wrote, err := s.configVersion(readers[comp])
		if err != nil || version == "" {
			return err
		}
		pods, err := r.podsOf(ctx, sc, comp)
		if err != nil {
			return err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			seen, nudged := pod.Annotations[AnnotationConfigSeen]
			if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || seen == version || (!nudged && !wrote) {
				continue
			}
			patch := client.RawPatch(client.Merge.Type(), fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationConfigSeen, version))
			if err := r.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("nudge pod %s: %w", pod.Name, err)
			}
			log.FromContext(ctx).V(1).Info("nudged a pod to sync its ConfigMaps", "pod", pod.Name, "version", version)
		}
	}
	return nil
}

// configVersion is the version of the named ConfigMaps as this reconcile rendered them (their
// hashes, short, joined), and whether the reconcile wrote any of them. Empty when one of them
// is not rendered this time.
func (s *reconcileScope) configVersion(names []string) (string, bool, error) {
	var parts []string
	wrote := false
	for _, name := range names {
		obj := s.rendered("ConfigMap", name)
		if obj == nil {
			return "", false, nil
		}
		h, err := objectHash(obj)
		if err != nil {
			return "", false, err
		}
		parts = append(parts, h[:12])
		wrote = wrote || s.written[freshKey{kind: "ConfigMap", name: name}]
	}
	return strings.Join(parts, "."), wrote, nil
}

// rendered is the object of that kind and name among the rendered parts, or nil.
func (s *reconcileScope) rendered(kind, name string) client.Object {
	for _, p := range s.parts {
		for _, obj := range p.Objects {
			if obj.GetObjectKind().GroupVersionKind().Kind == kind && obj.GetName() == name {
				return obj
			}
		}
	}
	return nil
}
