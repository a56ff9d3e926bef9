package policy

import (
	"errors"
	"strings"
	"testing"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

func cluster(hostPaths ...string) *slurmv1alpha1.SlurmCluster {
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Spec.Images.Worker = "registry.example.com/hpc/slurmd:24.11"
	for _, p := range hostPaths {
		sc.Spec.VolumeSources = append(sc.Spec.VolumeSources, slurmv1alpha1.VolumeSource{Name: "v", HostPath: &slurmv1alpha1.HostPathSource{Path: p}})
	}
	return base.WithDefaults(sc)
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Policy
		sc     *slurmv1alpha1.SlurmCluster
		field  string // "" when allowed
	}{
		{"the zero policy allows anything", Policy{}, cluster("/scratch"), ""},
		{"a default image outside the allowed prefixes", Policy{ImagePrefixes: []string{"registry.example.com/"}}, cluster(), "spec.images.controller"},
		{"every image inside", Policy{ImagePrefixes: []string{"registry.example.com/", "slurm-k8s/"}}, cluster(), ""},
		{"no hostPath allowed", Policy{HostPaths: []string{}}, cluster("/scratch"), "spec.volumeSources[0].hostPath.path"},
		{"a hostPath under an allowed directory", Policy{HostPaths: []string{"/scratch"}}, cluster("/scratch/slurm"), ""},
		{"a hostPath that only shares a prefix", Policy{HostPaths: []string{"/scratch"}}, cluster("/scratch2"), "spec.volumeSources[0].hostPath.path"},
		{"a hostPath that climbs out", Policy{HostPaths: []string{"/scratch"}}, cluster("/scratch/../etc"), "spec.volumeSources[0].hostPath.path"},
		{"no hostPath at all, none allowed", Policy{HostPaths: []string{}}, cluster(), ""},
		{"an allowed directory written with a trailing slash", Policy{HostPaths: []string{"/scratch/"}}, cluster("/scratch/slurm/"), ""},
		{"a hostPath that climbs out into a system tree", Policy{HostPaths: []string{"/scratch"}}, cluster("/scratch/../etc/kubernetes"), "spec.volumeSources[0].hostPath.path"},
		{"a hostPath that climbs out and back in", Policy{HostPaths: []string{"/scratch"}}, cluster("/scratch/../scratch/slurm"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Check(tc.sc)
			var v *Violation
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &v) || v.Field != tc.field):
				t.Fatalf("want a violation of %s, got %v", tc.field, err)
			case tc.field != "" && !strings.Contains(err.Error(), "not allowed by the operator's policy"):
				t.Fatalf("message: %v", err)
			}
		})
	}
}

func TestParseList(t *testing.T) {
	if ParseList("") != nil {
		t.Error(`"" must allow anything`)
	}
	if l := ParseList("none"); l == nil || len(l) != 0 {
		t.Errorf(`"none" must allow nothing: %#v`, l)
	}
	if l := ParseList(" a/ ,b/,"); len(l) != 2 || l[0] != "a/" || l[1] != "b/" {
		t.Errorf("list: %#v", l)
	}
}
