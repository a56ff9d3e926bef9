package base

import (
	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// Label keys the operator sets.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelPodIndex is set by the StatefulSet controller on each pod (Kubernetes 1.28+).
	LabelPodIndex = "apps.kubernetes.io/pod-index"

	// AnnotationRestartHash on a pod template is a hash of the inputs that need a restart to
	// take effect and are not already part of the template (for example slurmdbd.conf).
	AnnotationRestartHash = "slurm.hpc.dev/restart-hash"

	// LabelBusy marks a worker pod whose Slurm node runs jobs. The operator sets it from Slurm's
	// node states; the busy PodDisruptionBudget selects on it.
	LabelBusy = "slurm.hpc.dev/busy"

	// ManagedBy is the value of LabelManagedBy, and the server-side apply field owner.
	ManagedBy = "slurm-operator"
)

// Labels are the labels of every object of a component.
func Labels(sc *slurmv1alpha1.SlurmCluster, comp slurmv1alpha1.Component) map[string]string {
	l := SelectorLabels(sc, comp)
	l[LabelManagedBy] = ManagedBy
	return l
}

// SelectorLabels select the pods of a component. They never change for a component, so they
// are safe in immutable StatefulSet selectors.
func SelectorLabels(sc *slurmv1alpha1.SlurmCluster, comp slurmv1alpha1.Component) map[string]string {
	return map[string]string{
		LabelName:      "slurm",
		LabelInstance:  sc.Name,
		LabelComponent: string(comp),
	}
}

// ClusterLabels select every object of a cluster.
func ClusterLabels(sc *slurmv1alpha1.SlurmCluster) map[string]string {
	return map[string]string{LabelName: "slurm", LabelInstance: sc.Name}
}
