package base

import (
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
