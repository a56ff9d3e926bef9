package slurmfacts

import (
	"strings"
	"testing"
)

func TestParseAndImageRelease(t *testing.T) {
	for in, want := range map[string]string{
		"24.11": "24.11", "24.11.5": "24.11", "24.11.5-1": "24.11", "26.05-nvml": "26.05",
		"slurm-wlm 24.11.5": "24.11", "slurm 26.05.3": "26.05", "v26.05": "26.05",
		"latest": "", "2024.11": "", "24.111": "", "24.13": "", "24": "", "": "",
	} {
		r, ok := ParseRelease(in)
		if got := map[bool]string{true: r.String(), false: ""}[ok]; got != want {
			t.Errorf("ParseRelease(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"slurm-k8s/slurmd:24.11":                         "24.11",
		"registry.example:5000/slurm-k8s/slurmd:26.05.5": "26.05",
		"registry.example:5000/slurm-k8s/slurmd":         "",
		"slurm-k8s/slurmd:latest":                        "",
		"slurm-k8s/slurmd:24.11@sha256:0123":             "24.11",
		"slurm-k8s/slurmd@sha256:0123":                   "",
	} {
		r, ok := ImageRelease(in)
		if got := map[bool]string{true: r.String(), false: ""}[ok]; got != want {
			t.Errorf("ImageRelease(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckUpgrade(t *testing.T) {
	r := func(s string) Release {
		v, ok := ParseRelease(s)
		if !ok {
			t.Fatalf("%q", s)
		}
		return v
	}
	for _, c := range []struct{ from, to, want string }{
		{"24.11", "24.11", ""},
		{"24.11", "25.05", ""},
		{"24.11", "26.05", ""},
		{"24.05", "25.11", ""},
		{"24.11", "26.11", "4 releases"},
		{"23.11", "26.05", "5 releases"},
		{"26.05", "24.11", "cannot downgrade"},
		{"25.05", "24.11", "cannot downgrade"},
	} {
		err := CheckUpgrade(r(c.from), r(c.to))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s → %s: %v", c.from, c.to, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s → %s: %v, want %q", c.from, c.to, err, c.want)
		}
	}
}
