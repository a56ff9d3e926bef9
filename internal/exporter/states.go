package exporter

import (
	"strconv"
	"strings"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// Node states, as sinfo's compact states name them (idle, mix, alloc, comp, drng, drain, down,
// fail), spelled out.
const (
	StateIdle       = "idle"
	StateMixed      = "mixed"
	StateAllocated  = "allocated"
	StateCompleting = "completing"
	StateDraining   = "draining"
	StateDrained    = "drained"
	StateDown       = "down"
	StateFail       = "fail"
	StateFuture     = "future"
	StateUnknown    = "unknown"
)

// Who drained a node: the operator (its reasons start with slurmfacts.DrainReasonPrefix) or
// an admin (any other reason).
const (
	OwnerOperator = "operator"
	OwnerAdmin    = "admin"
)

// NodeState is a node's one state, from its flags: down (or not responding) first, then fail,
// drained or draining (a drained node still running jobs), then what its CPUs do.
func NodeState(n slurm.Node) string {
	switch {
	case n.Down():
		return StateDown
	case n.Has("FAIL"):
		return StateFail
	case n.Has("DRAIN") && n.Busy():
		return StateDraining
	case n.Has("DRAIN"):
		return StateDrained
	case n.Has("COMPLETING"):
		return StateCompleting
	case n.Has("ALLOCATED"):
		return StateAllocated
	case n.Has("MIXED"):
		return StateMixed
	case n.Has("IDLE"):
		return StateIdle
	case n.Has("FUTURE"):
		return StateFuture
	}
	return StateUnknown
}

// ReasonOwner says who took a drained, draining or failed node out: OwnerOperator or
// OwnerAdmin; "" for any other node (a down node's reason is Slurm's own).
func ReasonOwner(n slurm.Node, state string) string {
	switch state {
	case StateDrained, StateDraining, StateFail:
	default:
		return ""
	}
	if strings.HasPrefix(n.Reason, slurmfacts.DrainReasonPrefix) {
		return OwnerOperator
	}
	if n.Reason == "" {
		return ""
	}
	return OwnerAdmin
}

// OperatorReason names, for a node the operator took out, which of its drains it is: update,
// scale-down, pod-stopping, health (the periodic health check), kubernetes-node (its
// Kubernetes node is cordoned, not ready, short of GPUs or has a problem condition) or other; "" for any other node.
func OperatorReason(n slurm.Node, owner string) string {
	if owner != OwnerOperator {
		return ""
	}
	for _, r := range []struct{ prefix, name string }{
		{slurmfacts.DrainUpdate, "update"},
		{slurmfacts.DrainScaleDown, "scale-down"},
		{slurmfacts.DrainPodStopping, "pod-stopping"},
		{slurmfacts.DrainHealth, "health"},
		{slurmfacts.DrainKubernetesNode, "kubernetes-node"},
	} {
		if strings.HasPrefix(n.Reason, r.prefix) {
			return r.name
		}
	}
	return "other"
}

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
	for _, entry := range splitTop(gres) {
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

// splitTop splits at the commas that are not inside parentheses: "gpu:2(IDX:0,2),shard:4".
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
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
