package slurm

import (
	"strings"
	"unicode/utf8"

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
func NodeState(n Node) string {
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
// OwnerAdmin; "" for any other node. A down node's reason is Slurm's own ("Not responding"),
// unless the operator drained it first (a worker whose Kubernetes node is not ready usually
// stops answering too, and Slurm keeps the operator's reason): then it is the operator's.
func ReasonOwner(n Node, state string) string {
	operators := strings.HasPrefix(n.Reason, slurmfacts.DrainReasonPrefix)
	switch state {
	case StateDrained, StateDraining, StateFail:
	case StateDown:
		if operators {
			return OwnerOperator
		}
		return ""
	default:
		return ""
	}
	if operators {
		return OwnerOperator
	}
	if n.Reason == "" {
		return ""
	}
	return OwnerAdmin
}

// OperatorReason names, for a node the operator took out, which of its drains it is: update,
// scale-down, pod-stopping, health (the periodic health check), kubernetes-node (its
// Kubernetes node is cordoned, not ready, short of GPUs or has a problem condition), check or
// other; "" for any other node.
func OperatorReason(n Node, owner string) string {
	if owner != OwnerOperator {
		return ""
	}
	for _, r := range []struct{ prefix, name string }{
		{slurmfacts.DrainUpdate, "update"},
		{slurmfacts.DrainScaleDown, "scale-down"},
		{slurmfacts.DrainPodStopping, "pod-stopping"},
		{slurmfacts.DrainHealth, "health"},
		{slurmfacts.DrainKubernetesNode, "kubernetes-node"},
		{slurmfacts.DrainCheck, "check"},
	} {
		if strings.HasPrefix(n.Reason, r.prefix) {
			return r.name
		}
	}
	return "other"
}

// OutOfService reports whether a node in this state runs no new jobs for a reason someone
// gave: drained, draining, down or failed.
func OutOfService(state string) bool {
	switch state {
	case StateDrained, StateDraining, StateDown, StateFail:
		return true
	}
	return false
}

// MaxReasonShown bounds a node's reason where it is shown (a metric label, the status): a
// health check's output can be long.
const MaxReasonShown = 200

// ShownReason is the node's reason cut to MaxReasonShown bytes, on a character boundary.
func (n Node) ShownReason() string {
	s := n.Reason
	if len(s) <= MaxReasonShown {
		return s
	}
	i := MaxReasonShown
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
