package slurm

import (
	"slices"
	"strings"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// Node is what the operator needs to know of a Slurm node.
type Node struct {
	Name   string   `json:"name"`
	State  []string `json:"state"`
	Reason string   `json:"reason"`
	// Comment is the node's comment (scontrol update Comment=); active checks whose failure
	// only comments write there.
	Comment  string `json:"comment"`
	ReasonBy string `json:"reason_set_by_user"`
	// ReasonAt is when the reason was set, in seconds since the epoch (0 or unset: never).
	ReasonAt  Number `json:"reason_changed_at"`
	AllocCPUs int64  `json:"alloc_cpus"`
	CPUs      int64  `json:"cpus"`
	Gres      string `json:"gres"`
	GresUsed  string `json:"gres_used"`
	// RealMemory and AllocMemory are in MiB.
	RealMemory  int64    `json:"real_memory"`
	AllocMemory int64    `json:"alloc_memory"`
	Partitions  []string `json:"partitions"`
	// Address is where slurmctld sends the node's messages (NodeAddr): a name it resolved once
	// and keeps resolved, or an address set by an update.
	Address string `json:"address"`
	// LastBusy is when the node last ran a job, in seconds since the epoch (slurmctld's own
	// idle clock, which power saving uses).
	LastBusy Number `json:"last_busy"`
}

// Has reports whether the node's state holds the flag (IDLE, DRAIN, COMPLETING, …).
func (n Node) Has(flag string) bool { return slices.Contains(n.State, flag) }

// OwnedDrain reports whether the node is drained or draining with a reason the operator set.
func (n Node) OwnedDrain() bool {
	return n.Has("DRAIN") && strings.HasPrefix(n.Reason, slurmfacts.DrainReasonPrefix)
}

// Drained reports whether the node is drained (or failed: an admin's FAIL takes no jobs either)
// and runs nothing: DRAIN or FAIL with IDLE, not COMPLETING, and no allocated CPUs. sinfo's
// compact state can lag ("draining" on an idle drained node), so the decision is made from the
// flags.
func (n Node) Drained() bool {
	return (n.Has("DRAIN") || n.Has("FAIL")) && n.Has("IDLE") && !n.Has("COMPLETING") && !n.Has("MIXED") && !n.Has("ALLOCATED") && n.AllocCPUs == 0
}

// Busy reports whether jobs run on the node (or end on it).
func (n Node) Busy() bool {
	return n.Has("ALLOCATED") || n.Has("MIXED") || n.Has("COMPLETING") || n.AllocCPUs > 0
}

// Down reports whether Slurm considers the node down or not responding.
func (n Node) Down() bool { return n.Has("DOWN") || n.Has("NOT_RESPONDING") }

// Missing returns the names in want that the nodes lack. slurm.conf lists every worker, so
// slurmctld's answer lists them too: a node it lacks is unknown, and the operator treats it as
// busy, never as idle.
func Missing(nodes []Node, want []string) []string {
	have := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		have[n.Name] = true
	}
	var out []string
	for _, w := range want {
		if !have[w] {
			out = append(out, w)
		}
	}
	return out
}

// Counts are the node counts the SlurmCluster status reports.
type Counts struct {
	Idle, Allocated, Drained int32
}

// Count sorts nodes into idle (and responding), allocated (allocated or mixed) and drained (or
// draining). Down nodes count in none.
func Count(nodes []Node) Counts {
	var c Counts
	for _, n := range nodes {
		switch {
		case n.Has("DRAIN"):
			c.Drained++
		case n.Busy():
			c.Allocated++
		case n.Has("IDLE") && !n.Down():
			c.Idle++
		}
	}
	return c
}
