// Package policy is what the operator's installer allows SlurmClusters to ask for, beyond what
// the API's validation checks: whoever may create a SlurmCluster chooses the images of
// privileged containers and the node directories they mount, so an installation can restrict
// both to what it trusts.
package policy

import (
	"fmt"
	"path"
	"strings"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// Policy restricts images and hostPath volume sources. The zero Policy allows everything the
// API allows.
type Policy struct {
	// ImagePrefixes, when not empty, are the only prefixes an image may start with
	// ("registry.example.com/hpc/").
	ImagePrefixes []string
	// HostPaths says which hostPath volume sources are allowed: nil allows any (the
	// renderers still refuse the node's system directories), an empty list allows none, and
	// otherwise a path must be one of these directories or under one.
	HostPaths []string
}

// ParseList reads a flag's comma-separated list; "none" is the empty, non-nil list and ""
// is nil.
func ParseList(s string) []string {
	if s == "" {
		return nil
	}
	if s == "none" {
		return []string{}
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Violation is a field of the spec the policy does not allow.
type Violation struct {
	Field, Value, Why string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("%s %q is not allowed by the operator's policy: %s", v.Field, v.Value, v.Why)
}

// Check returns the first field of sc (with its defaults applied) that the policy refuses.
func (p Policy) Check(sc *slurmv1alpha1.SlurmCluster) error {
	if len(p.ImagePrefixes) > 0 {
		im := sc.Spec.Images
		images := []struct{ field, value string }{
			{"spec.images.controller", im.Controller}, {"spec.images.worker", im.Worker},
			{"spec.images.login", im.Login}, {"spec.images.accounting", im.Accounting},
			{"spec.images.munge", im.Munge}, {"spec.images.exporter", im.Exporter},
		}
		if sc.Spec.PopulateJail != nil {
			images = append(images, struct{ field, value string }{"spec.populateJail.image", sc.Spec.PopulateJail.Image})
		}
		for _, i := range images {
			if i.value != "" && !hasPrefix(i.value, p.ImagePrefixes) {
				return &Violation{i.field, i.value, "images must start with one of " + strings.Join(p.ImagePrefixes, ", ")}
			}
		}
	}
	if p.HostPaths != nil {
		for i, v := range sc.Spec.VolumeSources {
			if v.HostPath == nil {
				continue
			}
			field := fmt.Sprintf("spec.volumeSources[%d].hostPath.path", i)
			if len(p.HostPaths) == 0 {
				return &Violation{field, v.HostPath.Path, "hostPath volume sources are not allowed"}
			}
			if !underOneOf(v.HostPath.Path, p.HostPaths) {
				return &Violation{field, v.HostPath.Path, "a hostPath must be one of, or under, " + strings.Join(p.HostPaths, ", ")}
			}
		}
	}
	return nil
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// underOneOf compares cleaned paths, so /scratch/../etc is not under /scratch.
func underOneOf(p string, dirs []string) bool {
	p = path.Clean("/" + p)
	for _, d := range dirs {
		d = path.Clean("/" + d)
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}
