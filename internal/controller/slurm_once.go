package controller

import (
	"context"
	"time"

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
		start := time.Now()
		c.nodes, c.err = c.api.Nodes(ctx)
		observeSlurm("nodes", time.Since(start), c.err)
		c.fetched = true
	}
	return c.nodes, c.err
}

func (c *slurmOnce) Drain(ctx context.Context, name, reason string) error {
	c.fetched = false
	start := time.Now()
	err := c.api.Drain(ctx, name, reason)
	observeSlurm("drain", time.Since(start), err)
	return err
}

// SetAddress changes where slurmctld reaches a node, not its state: the answer stays.
func (c *slurmOnce) SetAddress(ctx context.Context, name, address string) error {
	start := time.Now()
	err := c.api.SetAddress(ctx, name, address)
	observeSlurm("set-address", time.Since(start), err)
	return err
}

func (c *slurmOnce) ResumeIfOwned(ctx context.Context, name string) (bool, error) {
	c.fetched = false
	start := time.Now()
	ok, err := c.api.ResumeIfOwned(ctx, name)
	observeSlurm("resume", time.Since(start), err)
	return ok, err
}

// SetPower changes a node's power state: the next question asks again.
func (c *slurmOnce) SetPower(ctx context.Context, name string, up bool) error {
	c.fetched = false
	start := time.Now()
	err := c.api.SetPower(ctx, name, up)
	observeSlurm("set-power", time.Since(start), err)
	return err
}

// SetNodeComment changes a node's comment: the next question asks again.
func (c *slurmOnce) SetNodeComment(ctx context.Context, name, comment string) error {
	c.fetched = false
	start := time.Now()
	err := c.api.SetNodeComment(ctx, name, comment)
	observeSlurm("set-comment", time.Since(start), err)
	return err
}

// SetJobAdminComment changes a job's admin comment (the nodes are not asked about).
func (c *slurmOnce) SetJobAdminComment(ctx context.Context, id int64, comment string) error {
	start := time.Now()
	err := c.api.SetJobAdminComment(ctx, id, comment)
	observeSlurm("set-job-comment", time.Since(start), err)
	return err
}

// Jobs lists slurmctld's jobs; the answer is not kept (only an elastic set's ended power-ups ask).
func (c *slurmOnce) Jobs(ctx context.Context) ([]slurm.Job, error) {
	start := time.Now()
	jobs, err := c.api.Jobs(ctx)
	observeSlurm("jobs", time.Since(start), err)
	return jobs, err
}
