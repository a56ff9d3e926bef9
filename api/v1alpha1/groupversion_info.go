// Package v1alpha1 holds the SlurmCluster API: one custom resource that describes a whole
// Slurm cluster (controller, workers, login, accounting, exporter, the shared-root jail).
//
// The types carry their own validation (OpenAPI markers and CEL rules) so that invalid specs are
// rejected at admission with the field named. Nothing here talks to the API server.
//
// +kubebuilder:object:generate=true
// +groupName=slurm.hpc.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of SlurmCluster.
	GroupVersion = schema.GroupVersion{Group: "slurm.hpc.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &SlurmCluster{}, &SlurmClusterList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
