package slurmconf

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

//go:embed node-health.sh
var nodeHealthTemplate string

// NodeHealthScript is the file name of the health check in the Slurm config folder.
const NodeHealthScript = "slurm-node-health.sh"

// nodeHealth renders the health check for spec.periodicChecks: the checks to run (all that fit
// when none are listed), the action, and what a healthy node looks like.
func nodeHealth(in base.Input) string {
	pc := in.Cluster.Spec.PeriodicChecks
	checks := pc.Checks
	if len(checks) == 0 {
		checks = []slurmv1alpha1.HealthCheck{slurmv1alpha1.HealthCheckGPUCount, slurmv1alpha1.HealthCheckNvidiaSMI, slurmv1alpha1.HealthCheckJailMounted, slurmv1alpha1.HealthCheckJailWritable}
	}
	names := make([]string, 0, len(checks))
	for _, c := range checks {
		names = append(names, string(c))
	}
	gpus := expectedGPUs(in)
	marker := ""
	if pj := in.Cluster.Spec.PopulateJail; pj != nil && pj.Image != "" {
		marker = "/" + slurmfacts.JailMarkerFile
	}
	minFree := int64(1 << 30)
	if q := pc.JailMinFreeSpace; q != nil {
		minFree = q.Value()
	}
	return strings.NewReplacer(
		"@MIN_FREE_KB@", strconv.FormatInt((minFree+1023)/1024, 10),
		"@CHECKS@", strings.Join(names, " "),
		"@ACTION@", string(pc.Action),
		"@GPUS@", gpus,
		"@JAIL_MARKER@", marker,
		"@DRAIN_HEALTH@", slurmfacts.DrainHealth,
	).Replace(nodeHealthTemplate)
}

// expectedGPUs is the health check's count of whole GPUs a node has: a number, or with node
// sets a shell expression that picks the count of the node's set by its name (SLURMD_NODENAME).
// MIG devices are not whole GPUs: the count check compares whole GPUs only.
func expectedGPUs(in base.Input) string {
	whole := func(set string) string {
		g := in.GPUOf(set)
		if g.MIGDevices() {
			return "0"
		}
		return strconv.Itoa(int(g.Count))
	}
	sets := in.WorkerSets()
	if len(sets) == 1 {
		return whole(sets[0].Name)
	}
	var b strings.Builder
	b.WriteString(`$(case "${SLURMD_NODENAME:-}" in`)
	for _, s := range sets[1:] {
		fmt.Fprintf(&b, " (%s-*) echo %s ;;", s.Name, whole(s.Name))
	}
	// The parenthesised patterns keep every shell from reading a pattern's ")" as the end of
	// the command substitution.
	fmt.Fprintf(&b, " (*) echo %s ;; esac)", whole(sets[0].Name))
	return b.String()
}
