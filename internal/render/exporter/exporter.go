// Package exporter renders the Prometheus exporter for Slurm metrics (cmd/slurm-exporter): a
// Deployment, its Service, and a ServiceMonitor when the Prometheus operator's API is served.
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
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmctld"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

const comp = slurmv1alpha1.ComponentExporter

// uid is the exporter's user (the image's nonroot user); the token is readable by its group.
const uid = 65532

const (
	// tokenDir is where the exporter mounts its token Secret: the whole Secret, not one file of
	// it, so that the kubelet's updates (the renewed token) reach the running exporter.
	tokenDir    = "/etc/slurm-exporter"
	volumeToken = "token"
)

// TokenSecret holds the exporter's token: a JWT for slurmfacts.MetricsUser, which the
// controller signs and renews (Keys.ExporterToken). The exporter reads it; the JWT key, which
// signs tokens for any user (root included), never reaches the exporter's pod.
func TokenSecret(in base.Input) *corev1.Secret {
	sc := in.Cluster
	return base.Secret(base.ObjectMeta(sc, sc.ExporterTokenSecretName(), comp), map[string][]byte{base.ExporterTokenKey: in.Keys.ExporterToken})
}

// Args are the exporter's arguments: slurmrestd's address, its token file and user, the
// cluster label, and whether to ask slurmdbd and export per-user series.
func Args(in base.Input) []string {
	sc := in.Cluster
	domain := in.ClusterDomain
	if domain == "" {
		domain = base.DefaultClusterDomain
	}
	return []string{
		fmt.Sprintf("--listen-address=:%d", slurmfacts.ExporterPort),
		"--slurmrestd-url=" + slurmctld.RestdURL(sc, domain),
		"--token-file=" + tokenDir + "/" + base.ExporterTokenKey,
		"--user=" + slurmfacts.MetricsUser,
		"--cluster=" + sc.Spec.ClusterName,
		fmt.Sprintf("--accounting=%t", sc.Spec.SlurmNodes.Accounting.Enabled),
		fmt.Sprintf("--per-user-metrics=%t", ptr.Deref(sc.Spec.SlurmNodes.Exporter.PerUserMetrics, true)),
	}
}

// Deployment runs the exporter. It needs no munge, no Slurm config and no key: it talks to
// slurmrestd with the token of TokenSecret.
func Deployment(in base.Input) *appsv1.Deployment {
	sc := in.Cluster
	spec := sc.Spec.SlurmNodes.Exporter
	probe := func(failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("metrics")}},
			FailureThreshold: failures,
		}
	}
	pod := corev1.PodSpec{
		Containers: []corev1.Container{base.Container(sc, corev1.Container{
			Name:  "exporter",
			Image: sc.Spec.Images.Exporter,
			Args:  Args(in),
			Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: slurmfacts.ExporterPort}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: volumeToken, MountPath: tokenDir, ReadOnly: true},
			},
			Resources:      spec.Resources.Core(),
			ReadinessProbe: probe(3),
			LivenessProbe:  probe(6),
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		})},
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](uid), RunAsGroup: ptr.To[int64](uid), FSGroup: ptr.To[int64](uid),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Volumes: []corev1.Volume{{Name: volumeToken, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: sc.ExporterTokenSecretName(), DefaultMode: ptr.To[int32](0o440),
		}}}},
		AutomountServiceAccountToken: ptr.To(false),
		DNSConfig:                    base.DNSConfig(sc, sc.Namespace, in.ClusterDomain),
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
