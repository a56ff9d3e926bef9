package controller

import (
	"context"
	"testing"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// countingSlurm counts questions; it stands in for slurmctld in this test of pure logic.
type countingSlurm struct{ nodes, writes int }

func (c *countingSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	c.nodes++
	return []slurm.Node{{Name: "worker-0", State: []string{"IDLE"}}}, nil
}
func (c *countingSlurm) Drain(context.Context, string, string) error      { c.writes++; return nil }
func (c *countingSlurm) SetAddress(context.Context, string, string) error { c.writes++; return nil }
func (c *countingSlurm) SetPower(context.Context, string, bool) error     { c.writes++; return nil }
func (c *countingSlurm) Jobs(context.Context) ([]slurm.Job, error)        { return nil, nil }
func (c *countingSlurm) SetJobAdminComment(context.Context, int64, string) error {
	c.writes++
	return nil
}
func (c *countingSlurm) SetNodeComment(context.Context, string, string) error {
	c.writes++
	return nil
}
func (c *countingSlurm) ResumeIfOwned(context.Context, string) (bool, error) {
	c.writes++
	return true, nil
}

func TestSlurmIsAskedOnceUntilANodeChanges(t *testing.T) {
	ctx := context.Background()
	api := &countingSlurm{}
	c := &slurmOnce{api: api}
	for i := 0; i < 3; i++ {
		if _, err := c.Nodes(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if api.nodes != 1 {
		t.Fatalf("asked %d times for one answer", api.nodes)
	}
	_ = c.Drain(ctx, "worker-0", slurmfacts.DrainUpdate)
	_, _ = c.Nodes(ctx)
	_, _ = c.ResumeIfOwned(ctx, "worker-0")
	_, _ = c.Nodes(ctx)
	_, _ = c.Nodes(ctx)
	if api.nodes != 3 || api.writes != 2 {
		t.Fatalf("after a drain and a resume: %d questions, %d writes; want 3 and 2", api.nodes, api.writes)
	}
}
