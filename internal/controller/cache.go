package controller

import (
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// CacheOptions keep only the operator's own Secrets and ConfigMaps in memory, not every Secret
// of the cluster (others, such as a user's database password, are read through the API
// reader), of Pods only the operator's (slimmed to what it reads), and of Nodes only their
// labels, allocatable GPUs, cordon and readiness: the GPU shape and the workers' node health.
//
// With namespaces, only SlurmClusters and children in those namespaces are watched (a namespaced
// install, whose Roles grant nothing elsewhere); nodes, which belong to no namespace, still are.
func CacheOptions(namespaces ...string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{base.LabelManagedBy: base.ManagedBy})
	opts := cache.Options{DefaultTransform: compactManagedFields, ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}:              {Label: managed},
		&corev1.ConfigMap{}:           {Label: managed},
		&networkingv1.NetworkPolicy{}: {Label: managed},
		&batchv1.CronJob{}:            {Label: managed},
		&appsv1.StatefulSet{}:         {Transform: slimStatefulSet},
		&corev1.Node{}:                {Transform: slimNode},
		&corev1.Pod{}:                 {Label: managed, Transform: slimPod},
		// Only the operator's own (the node names'): Kubernetes' EndpointSlices of the
		// operator's Services carry the Services' labels too, one per Service, and change with
		// every pod.
		&discoveryv1.EndpointSlice{}: {Label: labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: base.ManagedBy})},
	}}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// compactManagedFields drops the field sets of an object's managedFields: the operator reads
// only who wrote it and when (editedByOthers), and the field sets are often the largest part of
// a cached object.
func compactManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		mf := o.GetManagedFields()
		for i := range mf {
			mf[i].FieldsV1 = nil
		}
		o.SetManagedFields(mf)
	}
	return obj, nil
}

// slimStatefulSet drops a StatefulSet's pod template, less its containers' names and images
// (the Slurm release running, which an image change is checked against), and its claim
// templates: the operator reads its replicas, generation, status, annotations and writers, and
// renders the template itself. A worker's template (scripts, volumes) is most of the object.
func slimStatefulSet(obj any) (any, error) {
	s, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return obj, nil
	}
	var images []corev1.Container
	for _, c := range s.Spec.Template.Spec.Containers {
		images = append(images, corev1.Container{Name: c.Name, Image: c.Image})
	}
	s.Spec.Template = corev1.PodTemplateSpec{}
	s.Spec.Template.Spec.Containers = images
	s.Spec.VolumeClaimTemplates = nil
	return compactManagedFields(s)
}

// slimPod keeps of a pod what the operator reads: its name, labels (busy, revision, index), the
// config version it was nudged with, node, address, GPUs, deletion and readiness. A worker pod's spec (scripts, volumes) is most of its size, and
// thousands of workers would keep it in memory for nothing.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp,
	}}
	if v, ok := p.Annotations[AnnotationConfigSeen]; ok {
		slim.Annotations = map[string]string{AnnotationConfigSeen: v}
	}
	slim.Spec.NodeName = p.Spec.NodeName
	slim.Status.PodIP = p.Status.PodIP
	// The GPUs each container asked for: node health compares them with the node's.
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[slurmfacts.GPUResource]; ok {
			slim.Spec.Containers = append(slim.Spec.Containers, corev1.Container{
				Name: c.Name, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{slurmfacts.GPUResource: q}},
			})
		}
	}
	slim.Status.Phase = p.Status.Phase
	for _, c := range p.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady:
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status})
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse:
			// Why the scheduler cannot place it: the status says so (pending workers).
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	// Whether each container ever started, and why one waits: a scale-down need not wait for a
	// worker whose slurmd never registered, and the status names a pod that cannot start.
	slim.Status.InitContainerStatuses = slimContainerStatuses(p.Status.InitContainerStatuses)
	slim.Status.ContainerStatuses = slimContainerStatuses(p.Status.ContainerStatuses)
	return slim, nil
}

// slimContainerStatuses keeps what slurmdNeverRegistered and pendingWorkers read.
func slimContainerStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, c := range in {
		s := corev1.ContainerStatus{Name: c.Name, Started: c.Started, RestartCount: c.RestartCount}
		if w := c.State.Waiting; w != nil {
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		}
		if c.State.Running != nil {
			s.State.Running = &corev1.ContainerStateRunning{}
		}
		if t := c.State.Terminated; t != nil {
			s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Message: stateUnreadableLine(t.Message)}
		}
		if t := c.LastTerminationState.Terminated; t != nil {
			s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Message: stateUnreadableLine(t.Message)}
		}
		out = append(out, s)
	}
	return out
}

// slimNode keeps of a Node only what the GPU shape and node health need: name, labels,
// allocatable GPUs, cordon, readiness, and the other conditions that are True (the problems a
// cluster may name in drainOnNodeConditions; a healthy node has none), their messages bounded.
// Heartbeats and images change node status all the time; the cache need not hold them.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
	}}
	slim.Spec.Unschedulable = n.Spec.Unschedulable
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			// Since when: a worker stranded on a lost node is tainted out of service after a
			// while (the time changes with the status, not with heartbeats).
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		} else if c.Status == corev1.ConditionTrue {
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: boundedText(c.Message, 512)})
		}
	}
	if q, ok := n.Status.Allocatable[slurmfacts.GPUResource]; ok {
		slim.Status.Allocatable = corev1.ResourceList{slurmfacts.GPUResource: q}
	}
	return slim, nil
}

// boundedText is s cut to at most n bytes, on a character boundary.
func boundedText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
