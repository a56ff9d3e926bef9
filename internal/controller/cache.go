package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/slurm-k8s/slurm-operator/internal/gpu"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// CacheOptions keep only the operator's own Secrets and ConfigMaps in memory, not every Secret
// of the cluster (others, such as a user's database password, are read through the API
// reader), of Pods only the operator's, and of Nodes only GPU nodes, slimmed down to labels
// and allocatable GPUs.
//
// With namespaces, only SlurmClusters and children in those namespaces are watched (a namespaced
// install, whose Roles grant nothing elsewhere); nodes, which belong to no namespace, still are.
func CacheOptions(namespaces ...string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{base.LabelManagedBy: base.ManagedBy})
	gpuNodes := labels.SelectorFromSet(labels.Set{gpu.LabelPresent: "true"})
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}:    {Label: managed},
		&corev1.ConfigMap{}: {Label: managed},
		&corev1.Node{}:      {Label: gpuNodes, Transform: slimNode},
		&corev1.Pod{}:       {Label: managed},
	}}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// slimNode keeps of a Node only what the GPU shape needs: name, labels and allocatable GPUs.
// Heartbeats and images change node status all the time; the cache need not hold them.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
	}}
	if q, ok := n.Status.Allocatable[slurmfacts.GPUResource]; ok {
		slim.Status.Allocatable = corev1.ResourceList{slurmfacts.GPUResource: q}
	}
	return slim, nil
}
