// Package exporter renders the Prometheus exporter for Slurm metrics: a Deployment, its
// Service, and a ServiceMonitor when the Prometheus operator's API is served.
package exporter

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

const comp = slurmv1alpha1.ComponentExporter

// Deployment runs the exporter; it queries slurmctld with munge, like any Slurm client.
func Deployment(in base.Input) *appsv1.Deployment {
	sc := in.Cluster
	spec := sc.Spec.SlurmNodes.Exporter
	pod := corev1.PodSpec{
		InitContainers: []corev1.Container{base.MungeSidecar(sc, slurmfacts.MungeSocketDir)},
		Containers: []corev1.Container{base.Container(sc, corev1.Container{
			Name:  "exporter",
			Image: sc.Spec.Images.Exporter,
			Args:  []string{fmt.Sprintf("--listen-address=:%d", slurmfacts.ExporterPort)},
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: slurmfacts.ExporterPort}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: base.VolumeSlurmConfig, MountPath: slurmfacts.ConfDir, ReadOnly: true},
				{Name: base.VolumeMungeSocket, MountPath: slurmfacts.MungeSocketDir},
			},
			Resources: *spec.Resources.DeepCopy(),
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/metrics", Port: intstr.FromString("metrics")},
			}},
		})},
		Volumes:   base.CommonVolumes(sc),
		DNSConfig: base.DNSConfig(sc, sc.Namespace, in.ClusterDomain),
	}
	base.Scheduling(sc, spec.K8sNodeFilterName, &pod)
	return &appsv1.Deployment{
		TypeMeta:   base.TypeMeta("apps/v1", "Deployment"),
		ObjectMeta: base.ObjectMeta(sc, sc.ComponentName(comp), comp),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(spec.Size),
			Selector: &metav1.LabelSelector{MatchLabels: base.SelectorLabels(sc, comp)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: base.Labels(sc, comp)},
				Spec:       pod,
			},
		},
	}
}

// Service exposes the exporter's metrics port.
func Service(in base.Input) *corev1.Service {
	return base.Service(in.Cluster, comp, []corev1.ServicePort{
		{Name: "metrics", Port: slurmfacts.ExporterPort, TargetPort: intstr.FromString("metrics")},
	})
}

// ServiceMonitor asks the Prometheus operator to scrape the exporter. It is an unstructured
// object so the project does not depend on the Prometheus operator's Go module.
func ServiceMonitor(in base.Input) *unstructured.Unstructured {
	sc := in.Cluster
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "ServiceMonitor",
		"metadata": map[string]any{
			"name":      sc.ComponentName(comp),
			"namespace": sc.Namespace,
			"labels":    base.Unstructured(base.Labels(sc, comp)),
		},
		"spec": map[string]any{
			"selector":  map[string]any{"matchLabels": base.Unstructured(base.SelectorLabels(sc, comp))},
			"endpoints": []any{map[string]any{"port": "metrics", "interval": "30s"}},
		},
	}}
	return u
}
