package controller

import (
	"context"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// slurmOnce is the Slurm client of one reconcile: it asks slurmctld for the node list once and
// answers later questions from that answer, until the reconcile changes a node (a drain or a
// resume), after which the next question asks again. Phases thus share one answer without
// acting on one that their own writes made stale.
type slurmOnce struct {
	api     SlurmAPI
	fetched bool
	nodes   []slurm.Node
	err     error
}

func (c *slurmOnce) Nodes(ctx context.Context) ([]slurm.Node, error) {
	if !c.fetched {
		c.nodes, c.err = c.api.Nodes(ctx)
		c.fetched = true
	}
	return c.nodes, c.err
}

func (c *slurmOnce) Drain(ctx context.Context, name, reason string) error {
	c.fetched = false
	return c.api.Drain(ctx, name, reason)
}

func (c *slurmOnce) ResumeIfOwned(ctx context.Context, name string) (bool, error) {
	c.fetched = false
	return c.api.ResumeIfOwned(ctx, name)
}
