package base_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// A hostPath volume source at the node's root or a system directory would hand the node's own
// system to the pods, and the populate Job would copy a jail over it: it is never rendered.
func TestHostPathVolumeSourcesOnSystemDirectoriesAreRefused(t *testing.T) {
	for p, refused := range map[string]bool{
		"/": true, "//": true, "/etc/": true, "/var/lib/kubelet": true, "/usr/./": true, "/var/../etc": true,
		"/srv/jail": false, "/data/slurm-jail": false, "/var/lib/slurm-jail": false,
	} {
		sc := &slurmv1alpha1.SlurmCluster{}
		sc.Spec.VolumeSources = []slurmv1alpha1.VolumeSource{{Name: "jail", HostPath: &corev1.HostPathVolumeSource{Path: p}}}
		_, err := base.VolumeSourceVolume(sc, "jail", base.VolumeJail)
		if refused && (err == nil || !strings.Contains(err.Error(), "system directories")) {
			t.Errorf("hostPath %q: got %v, want a refusal", p, err)
		}
		if !refused && err != nil {
			t.Errorf("hostPath %q: %v", p, err)
		}
	}
}
