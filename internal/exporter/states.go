package exporter

import (
	"strconv"
	"strings"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// JobState is a job's state in lower case (pending, running, completed, failed, …), or
// completing while its nodes are still cleaning up.
func JobState(j slurm.Job) string {
	if j.Has("COMPLETING") {
		return "completing"
	}
	if len(j.State) == 0 {
		return "unknown"
	}
	return strings.ToLower(j.State[0])
}

// GPUsByType reads the GPUs of a node's gres string ("gpu:h100:8(S:0-1),gpu:a100:2" or
// "gpu:4(IDX:0-3)"), by type ("" for untyped GPUs). Other gres are left out.
func GPUsByType(gres string) map[string]int64 {
	out := map[string]int64{}
	for _, entry := range slurm.SplitOutside(gres, '(', ')') {
		if i := strings.IndexByte(entry, '('); i >= 0 {
			entry = entry[:i]
		}
		parts := strings.Split(entry, ":")
		if parts[0] != "gpu" || len(parts) < 2 {
			continue
		}
		typ, count := "", parts[len(parts)-1]
		if len(parts) == 3 {
			typ = parts[1]
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil {
			// "gpu:h100" without a count means one.
			typ, n = count, 1
		}
		out[typ] += n
	}
	return out
}

// TRES reads a job's TRES string (cpu=2,mem=3G,node=2,gres/gpu=4,gres/gpu:h100=4) into its
// CPUs and GPUs. The untyped gres/gpu total wins; without it the typed counts are summed.
func TRES(s string) (cpus, gpus int64) {
	var typed int64
	untyped := int64(-1)
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch {
		case k == "cpu":
			cpus = n
		case k == "gres/gpu":
			untyped = n
		case strings.HasPrefix(k, "gres/gpu:"):
			typed += n
		}
	}
	if untyped >= 0 {
		return cpus, untyped
	}
	return cpus, typed
}
