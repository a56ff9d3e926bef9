package slurm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// topologyCluster starts four workers, without accounting, with the topology t and the workers
// placed on nodes with these labels (as the controller finds them on the worker pods' nodes).
func topologyCluster(t *testing.T, ctx context.Context, topo *slurmv1alpha1.NetworkTopology, labels []map[string]string) *slurmharness.Cluster {
	t.Helper()
	sc := spec(t, int32(len(labels)))
	sc.Spec.SlurmNodes.Accounting = slurmv1alpha1.Accounting{}
	sc.Spec.SlurmConfig.Topology = topo
	r := render(t, sc)
	for i, l := range labels {
		r.in.Placements = append(r.in.Placements, base.WorkerPlacement{Name: fmt.Sprintf("worker-%d", i), Node: fmt.Sprintf("node-%d", i), Labels: l})
	}
	// The topology depends on the placements: render the config again with them.
	for name, text := range slurmconf.Files(r.in) {
		r.files[name] = []byte(text)
	}
	c := startClusterWith(t, ctx, r, len(labels), func(cfg *slurmharness.Config) { cfg.Accounting = nil })
	if err := c.WaitFor(ctx, "every worker idle", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "sinfo", "-h", "-o", "%D %t")
		return err == nil && out == fmt.Sprintf("%d idle\n", len(labels)), nil
	}); err != nil {
		t.Fatal(err)
	}
	return c
}

// jobNodes submits a job and returns the nodes it runs on once it runs, and its ID.
func jobNodes(t *testing.T, ctx context.Context, c *slurmharness.Cluster, args ...string) (string, string) {
	t.Helper()
	id := sbatch(t, ctx, c, append(args, "--wrap", "sleep 300")...)
	var nodes string
	if err := c.WaitFor(ctx, "job "+id+" running", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-j", id, "-o", "%T %N")
		f := strings.Fields(out)
		if err != nil || len(f) != 2 || f[0] != "RUNNING" {
			return false, nil
		}
		nodes = f[1]
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return id, nodes
}

// A tree from two switch labels: leaf switches under two spines, joined by a root. slurmctld
// reads it as a tree (scontrol show topology), places a two-node job under one leaf switch where
// Slurm alone would take worker-[0-1], and tells the job where it runs (SLURM_TOPOLOGY_ADDR).
func TestATreeTopologyKeepsAJobUnderOneLeafSwitch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const leaf, spine = "network.example.com/leaf", "network.example.com/spine"
	c := topologyCluster(t, ctx, &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyTree, SwitchLabels: []string{leaf, spine}}, []map[string]string{
		{leaf: "leaf1", spine: "spine1"}, {leaf: "leaf2", spine: "spine2"}, {leaf: "leaf1", spine: "spine1"}, {leaf: "leaf2", spine: "spine2"},
	})
	topo := login(t, ctx, c, "scontrol", "show", "topology")
	for _, want := range []string{"SwitchName=leaf1 ", "SwitchName=spine2 ", "SwitchName=root "} {
		if !strings.Contains(topo, want) {
			t.Fatalf("scontrol show topology lacks %q:\n%s", want, topo)
		}
	}
	id, nodes := jobNodes(t, ctx, c, "-N2", "--switches=1")
	if nodes != "worker-[0,2]" && nodes != "worker-[1,3]" {
		t.Fatalf("the two-node job runs on %s, not under one leaf switch:\n%s", nodes, topo)
	}
	out := login(t, ctx, c, "srun", "--jobid="+id, "--overlap", "-N2", "sh", "-c", "echo $SLURM_TOPOLOGY_ADDR")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "root.spine") || !strings.Contains(l, ".leaf") {
			t.Errorf("SLURM_TOPOLOGY_ADDR %q is not root.spineN.leafN.worker-N (all: %q)", l, out)
		}
	}
}

// Blocks from a label, interleaved by index: a two-node job runs inside one block where Slurm
// alone would take worker-[0-1].
func TestABlockTopologyKeepsAJobInOneBlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const clique = "nvidia.com/gpu.clique"
	topo := &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyBlock, BlockLabel: clique, BlockSizes: []int32{2, 4}}
	c := topologyCluster(t, ctx, topo, []map[string]string{{clique: "a"}, {clique: "b"}, {clique: "a"}, {clique: "b"}})
	shown := login(t, ctx, c, "scontrol", "show", "topology")
	if !strings.Contains(shown, "BlockName=a ") || !strings.Contains(shown, "BlockName=b ") {
		t.Fatalf("scontrol show topology lacks blocks a and b:\n%s", shown)
	}
	_, nodes := jobNodes(t, ctx, c, "-N2")
	if nodes != "worker-[0,2]" && nodes != "worker-[1,3]" {
		t.Fatalf("the two-node job runs on %s, not in one block:\n%s", nodes, shown)
	}
}

// A block with fewer workers than the base size (a rack still filling, a worker on another
// node): Slurm 24.11 would stop on it, so the base is lowered to its count; slurmctld runs, and
// the lone worker runs jobs.
func TestABlockBelowTheBaseSizeStopsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const clique = "nvidia.com/gpu.clique"
	topo := &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyBlock, BlockLabel: clique, BlockSizes: []int32{2, 4}}
	c := topologyCluster(t, ctx, topo, []map[string]string{{clique: "a"}, {clique: "a"}, {clique: "b"}})
	shown := login(t, ctx, c, "scontrol", "show", "topology")
	if !strings.Contains(shown, "BlockName=b ") {
		t.Fatalf("scontrol show topology lacks block b:\n%s", shown)
	}
	if _, nodes := jobNodes(t, ctx, c, "-N1", "-w", "worker-2"); nodes != "worker-2" {
		t.Fatalf("a job asking for worker-2 runs on %s", nodes)
	}
}
