package base_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// A hostPath volume source at the node's root, on a system directory or anywhere under a system
// tree would hand the node's own system to the pods, and the populate Job would copy a jail over
// it: it is never rendered. Paths are compared cleaned, as the kubelet mounts them.
func TestHostPathVolumeSourcesOnSystemDirectoriesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		path    string
		refused bool
	}{
		{"/", true},
		{"//", true},
		{"/etc/", true},
		{"/usr/./", true},
		{"/var/../etc", true},
		{"/var", true},
		{"/var/lib", true},
		{"/var/lib/kubelet", true},
		{"/var/lib/kubelet/", true},
		{"/home", true},
		{"/tmp", true},
		// Under a system tree: each of these passed when only the directories themselves were
		// refused.
		{"/etc/kubernetes", true},
		{"/etc/kubernetes/pki", true},
		{"/etc/kubernetes/", true},
		{"/var/lib/kubelet/pods", true},
		{"/var/lib/../lib/kubelet/x", true},
		{"/var/lib/kubelet/pods/../../kubelet/config.yaml", true},
		{"/usr/local/bin", true},
		{"/root/.ssh", true},
		{"/proc/1/root", true},
		{"/sys/fs/cgroup", true},
		{"/dev/nvme0n1", true},
		{"/run/containerd/containerd.sock", true},
		{"/var/run/docker.sock", true},
		{"/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", true},
		{"/var/lib/docker/volumes", true},
		{"/var/log/pods", true},
		{"/var/spool/cron/crontabs", true},
		{"/opt/cni/bin", true},
		{"/boot/grub", true},
		{"/lib/modules", true},
		{"etc/kubernetes", true},
		// Directories of their own, some under a directory that is refused by itself only.
		{"/srv/jail", false},
		{"/data/slurm-jail", false},
		{"/var/lib/slurm-jail", false},
		{"/tmp/slurm-operator-node/volumes/jail", false},
		{"/scratch/", false},
		{"/home/shared", false},
		{"/opt/slurm", false},
		{"/etcetera", false},
		{"/var/lib/kubelet-scratch", false},
		{"/var/spool/slurm", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			sc := &slurmv1alpha1.SlurmCluster{}
			sc.Spec.VolumeSources = []slurmv1alpha1.VolumeSource{{Name: "jail", HostPath: &slurmv1alpha1.HostPathSource{Path: tc.path}}}
			_, err := base.VolumeSourceVolume(sc, "jail", base.VolumeJail)
			if tc.refused && (err == nil || !strings.Contains(err.Error(), "system directories")) {
				t.Errorf("got %v, want a refusal", err)
			}
			if !tc.refused && err != nil {
				t.Errorf("refused: %v", err)
			}
		})
	}
}

// The spread is added to what the node filter asks, never in its place.
func TestSpreadAcrossNodesKeepsTheFiltersAffinity(t *testing.T) {
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Name = "c"
	filterTerm := corev1.WeightedPodAffinityTerm{Weight: 5, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "topology.kubernetes.io/zone"}}
	spec := &corev1.PodSpec{Affinity: &corev1.Affinity{
		NodeAffinity:    &corev1.NodeAffinity{},
		PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{filterTerm}},
	}}
	base.SpreadAcrossNodes(sc, slurmv1alpha1.ComponentLogin, spec)
	terms := spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	if spec.Affinity.NodeAffinity == nil || len(terms) != 2 || terms[0].PodAffinityTerm.TopologyKey != "topology.kubernetes.io/zone" ||
		terms[1].PodAffinityTerm.TopologyKey != corev1.LabelHostname || terms[1].PodAffinityTerm.LabelSelector.MatchLabels["app.kubernetes.io/component"] != "login" {
		t.Fatalf("affinity after the spread: %+v", spec.Affinity)
	}
	empty := &corev1.PodSpec{}
	base.SpreadAcrossNodes(sc, slurmv1alpha1.ComponentController, empty)
	if got := empty.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution; len(got) != 1 || got[0].Weight != 100 {
		t.Fatalf("spread on a pod without affinity: %+v", got)
	}
}
