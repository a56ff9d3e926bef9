package slurmconf

import (
	_ "embed"
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
	// MIG devices are not whole GPUs: the count check compares whole GPUs only.
	gpus := in.GPU.Count
	if in.GPU.MIGDevices() {
		gpus = 0
	}
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
		"@GPUS@", strconv.Itoa(int(gpus)),
		"@JAIL_MARKER@", marker,
		"@DRAIN_HEALTH@", slurmfacts.DrainHealth,
	).Replace(nodeHealthTemplate)
}
