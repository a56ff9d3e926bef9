package base

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// DefaultClusterDomain is the Kubernetes DNS domain when none is configured.
const DefaultClusterDomain = "cluster.local"

// WithDefaults returns a copy of sc with every default the CRD schema declares filled in, so
// renderers see the same values whether the object came from the API server or from a test.
// It never changes sc: the operator does not write defaults into the user's spec.
func WithDefaults(sc *slurmv1alpha1.SlurmCluster) *slurmv1alpha1.SlurmCluster {
	out := sc.DeepCopy()
	s := &out.Spec
	n := &s.SlurmNodes
	setInt32(&n.Controller.Size, 1)
	setInt32(&n.Login.Sshd.Port, 22)
	if n.Login.Service.Type == "" {
		n.Login.Service.Type = corev1.ServiceTypeLoadBalancer
	}
	setInt32(&n.Exporter.Size, 1)
	autoscalingDefaults(n.Worker.Autoscaling)
	for i := range n.NodeSets {
		autoscalingDefaults(n.NodeSets[i].Autoscaling)
	}
	if n.Worker.GresAutoDetect == "" {
		n.Worker.GresAutoDetect = slurmv1alpha1.GresAutoDetectOff
	}
	if db := n.Accounting.ExternalDB; db != nil {
		setInt32(&db.Port, slurmfacts.MariaDBPort)
		setString(&db.Database, "slurm_acct_db")
	}
	if pc := s.PeriodicChecks; pc != nil {
		setInt32(&pc.IntervalSeconds, 300)
		if pc.Action == "" {
			pc.Action = slurmv1alpha1.HealthActionDrain
		}
	}
	if s.NetworkPolicies.BlockedEgressCIDRs == nil {
		s.NetworkPolicies.BlockedEgressCIDRs = slices.Clone(slurmv1alpha1.DefaultBlockedEgressCIDRs)
	}
	im := &s.Images
	setString(&im.Controller, "slurm-k8s/slurmctld:24.11")
	setString(&im.Worker, "slurm-k8s/slurmd:24.11")
	setString(&im.Login, "slurm-k8s/login:24.11")
	setString(&im.Accounting, "slurm-k8s/slurmdbd:24.11")
	setString(&im.Munge, "slurm-k8s/munge:24.11")
	setString(&im.Exporter, "slurm-k8s/exporter:24.11")
	setString(&im.PullPolicy, string(corev1.PullIfNotPresent))
	return out
}

// autoscalingDefaults are the CRD's defaults of an autoscaling block.
func autoscalingDefaults(a *slurmv1alpha1.Autoscaling) {
	if a != nil {
		setInt32(&a.IdleTimeoutSeconds, 600)
		setInt32(&a.ResumeTimeoutSeconds, 600)
	}
}

func setInt32(p *int32, v int32) {
	if *p == 0 {
		*p = v
	}
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}
