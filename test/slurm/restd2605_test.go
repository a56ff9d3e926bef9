package slurm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// TestTheOperatorsClientReadsSlurm2605 runs the operator's Slurm client (REST API v0.0.42)
// against slurmctld, slurmdbd and slurmrestd 26.05, slurmrestd started with the controller
// pod's arguments: what the operator reads and writes (nodes, its drain and resume, a check's
// job and its exit code, slurmctld's statistics, slurmdbd's ping) works as on 24.11.
func TestTheOperatorsClientReadsSlurm2605(t *testing.T) {
	next := nextRootFS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := render(t, spec(t, 1))
	c := startClusterWith(t, ctx, r, 1, func(cfg *slurmharness.Config) { cfg.RootFS = next })
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	cl, err := slurmtest.StartRestd(wctx, c, ctlHost, r.in.Cluster, r.in.Keys.JWT)
	if err != nil {
		t.Fatalf("slurmrestd 26.05 with the controller pod's arguments: %v\n%s", err, c.Logs(ctlHost))
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].Name != "worker-0" || nodes[0].Gres != "gpu:h100:2" {
		t.Fatalf("nodes: %v %+v", err, nodes)
	}
	// What the operator does to a worker: its own drain, lifted only by itself.
	if err := cl.Drain(ctx, "worker-0", "slurm-operator: test"); err != nil {
		t.Fatalf("drain: %v", err)
	}
	if n, err := cl.Node(ctx, "worker-0"); err != nil || !strings.Contains(strings.Join(n.State, ","), "DRAIN") {
		t.Fatalf("after the drain: %v %+v", err, n)
	}
	if ok, err := cl.ResumeIfOwned(ctx, "worker-0"); err != nil || !ok {
		t.Fatalf("resume: %v %v", ok, err)
	}
	// A check's job: submitted over REST, read back until it ends.
	id, err := cl.Submit(ctx, slurm.BatchJob{Name: "check", Script: "#!/bin/sh\nexit 3\n", Nodes: []string{"worker-0"}, TimeLimit: time.Minute})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	var j slurm.Job
	if err := c.WaitFor(ctx, "the check job to end", func() (bool, error) {
		var found bool
		j, found, err = cl.Job(ctx, id)
		return found && strings.Join(j.State, ",") == "FAILED", err
	}); err != nil {
		t.Fatalf("%v: %+v", err, j)
	}
	if j.Exit.ReturnCode.Number != 3 {
		t.Errorf("the job's exit code reads %d, want 3", j.Exit.ReturnCode.Number)
	}
	d, err := cl.Diag(ctx)
	if err != nil || len(d.RPCsByMessageType) == 0 {
		t.Fatalf("diag: %v %+v", err, d)
	}
	if pings, err := cl.DatabasePings(ctx); err != nil || len(pings) == 0 {
		t.Fatalf("slurmdbd pings: %v %+v", err, pings)
	}
}
