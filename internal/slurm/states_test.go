package slurm

import (
	"testing"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// Who took a node out: a down node keeps the operator's reason when the operator drained it
// first (its Kubernetes node not ready, slurmd gone too), and Slurm's own otherwise.
func TestReasonOwner(t *testing.T) {
	for _, tc := range []struct {
		state  []string
		reason string
		want   string
	}{
		{[]string{"IDLE", "DRAIN"}, slurmfacts.DrainKubernetesNode + " n1 is not ready", OwnerOperator},
		{[]string{"DOWN", "DRAIN", "NOT_RESPONDING"}, slurmfacts.DrainKubernetesNode + " n1 is not ready", OwnerOperator},
		{[]string{"DOWN", "NOT_RESPONDING"}, "Not responding", ""},
		{[]string{"IDLE", "DRAIN"}, "bad DIMM", OwnerAdmin},
		{[]string{"IDLE"}, "", ""},
	} {
		n := Node{Name: "worker-0", State: tc.state, Reason: tc.reason}
		if got := ReasonOwner(n, NodeState(n)); got != tc.want {
			t.Errorf("%v %q: %q, want %q", tc.state, tc.reason, got, tc.want)
		}
	}
}
