package base

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// TypeMeta is set on every rendered object: server-side apply needs it.
func TypeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// ObjectMeta names an object of a component in the cluster's namespace, with its labels.
// Owner references are set by the controller, not here.
func ObjectMeta(sc *slurmv1alpha1.SlurmCluster, name string, comp slurmv1alpha1.Component) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: sc.Namespace, Labels: Labels(sc, comp)}
}

// SharedObjectMeta names an object that belongs to the whole cluster (config, keys).
func SharedObjectMeta(sc *slurmv1alpha1.SlurmCluster, name string) metav1.ObjectMeta {
	l := ClusterLabels(sc)
	l[LabelManagedBy] = ManagedBy
	return metav1.ObjectMeta{Name: name, Namespace: sc.Namespace, Labels: l}
}

// Unstructured converts string labels (or a node selector) for an unstructured object.
func Unstructured[V ~string](m map[string]V) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// Secret is an opaque Secret with this metadata (ObjectMeta or SharedObjectMeta) and data.
func Secret(meta metav1.ObjectMeta, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   TypeMeta("v1", "Secret"),
		ObjectMeta: meta,
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}
