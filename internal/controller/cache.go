package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// CacheOptions keep only the operator's own Secrets and ConfigMaps in memory, not every Secret
// of the cluster. Others (a user's database password) are read through the API reader.
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{base.LabelManagedBy: base.ManagedBy})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}:    {Label: managed},
		&corev1.ConfigMap{}: {Label: managed},
	}}
}
