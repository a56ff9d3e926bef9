package slurmconf

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/golden"
)

const (
	cliqueLabel = "nvidia.com/gpu.clique"
	leafLabel   = "network.example.com/leaf"
	spineLabel  = "network.example.com/spine"
)

// topologyCluster is a cluster of n workers with the topology t, and placements for the workers
// listed: each on a node with the labels given (nil: placed on a node without topology labels).
func topologyCluster(n int32, t *slurmv1alpha1.NetworkTopology, placements map[int]map[string]string) base.Input {
	sc := cluster(n)
	sc.Spec.SlurmConfig.Topology = t
	in := base.Input{Cluster: sc}
	for i, labels := range placements {
		in.Placements = append(in.Placements, base.WorkerPlacement{Name: fmt.Sprintf("worker-%d", i), Node: fmt.Sprintf("node-%d", i), Labels: labels})
	}
	return in
}

func block(topo ...string) map[int]map[string]string {
	out := map[int]map[string]string{}
	for i, v := range topo {
		switch v {
		case "-": // not placed
		case "":
			out[i] = nil
		default:
			out[i] = map[string]string{cliqueLabel: v}
		}
	}
	return out
}

// Goldens: a GB200-like cluster of two NVLink domains of four workers each, interleaved by
// index, with a third domain still filling (two workers) and a worker on an unlabelled node;
// and a two-level tree with a switch labelled under two spines.
func TestTopologyConfFollowsTheWorkersNodes(t *testing.T) {
	blockSpec := &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyBlock, BlockLabel: cliqueLabel}
	treeSpec := &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyTree, SwitchLabels: []string{leafLabel, spineLabel}}
	leaf := func(l, s string) map[string]string {
		m := map[string]string{leafLabel: l}
		if s != "" {
			m[spineLabel] = s
		}
		return m
	}
	for _, tc := range []struct {
		name string
		in   base.Input
	}{
		{"block", topologyCluster(8, &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyBlock, BlockLabel: cliqueLabel, BlockSizes: []int32{4, 8}},
			block("rack-a", "rack-b", "rack-a", "rack-b", "rack-a", "rack-b", "rack-a", "rack-b"))},
		{"block-filling", topologyCluster(12, blockSpec, block("rack-a", "rack-b", "rack-a", "rack-b", "rack-a", "rack-b", "rack-a", "rack-b", "rack-c", "rack-c", "", "-"))},
		{"tree", topologyCluster(8, treeSpec, map[int]map[string]string{
			0: leaf("leaf1", "spine1"), 1: leaf("leaf2", "spine1"), 2: leaf("leaf1", "spine1"), 3: leaf("leaf3", "spine2"),
			4: leaf("leaf3", "spine2"), 5: leaf("leaf2", "spine2"), 6: nil,
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := Files(tc.in)
			var b strings.Builder
			for _, line := range strings.Split(files[SlurmBaseConf], "\n") {
				if strings.HasPrefix(line, "TopologyPlugin=") {
					b.WriteString(line + "\n")
				}
			}
			b.WriteString("--- " + TopologyConf + "\n" + files[TopologyConf])
			b.WriteString("--- warnings\n" + strings.Join(TopologyWarnings(tc.in), "\n") + "\n")
			golden.Check(t, filepath.Join("testdata", "network-topology-"+tc.name+".golden"), []byte(b.String()))
		})
	}
}

func TestNoTopologyWritesNoFileAndNoPlugin(t *testing.T) {
	in := topologyCluster(4, nil, block("a", "a"))
	files := Files(in)
	if _, ok := files[TopologyConf]; ok {
		t.Fatalf("a cluster without spec.slurmConfig.topology got a %s:\n%s", TopologyConf, files[TopologyConf])
	}
	if strings.Contains(files[SlurmBaseConf], "TopologyPlugin") {
		t.Fatalf("slurm.conf sets a TopologyPlugin without spec.slurmConfig.topology:\n%s", files[SlurmBaseConf])
	}
}

// Slurm 24.11 stops (fatal) on a block smaller than the base block size, and on a block with no
// node; a node name it does not know is refused. So: every block written has at least the base
// size's workers, none is empty, and only workers of slurm.conf's node list appear.
func TestEveryBlockWrittenHoldsTheBaseSize(t *testing.T) {
	spec := &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyBlock, BlockLabel: cliqueLabel, BlockSizes: []int32{4, 16}}
	for _, tc := range []struct {
		name      string
		placed    []string
		wantSizes string
		warn      bool
	}{
		{"full blocks", []string{"a", "a", "a", "a", "b", "b", "b", "b"}, "BlockSizes=4,16", false},
		{"one block filling", []string{"a", "a", "a", "a", "b", "b", "-", "-"}, "BlockSizes=2,8", true},
		{"a lone worker", []string{"a", "a", "a", "a", "b", "b", "b", "b", ""}, "BlockSizes=1,4", true},
		{"nothing placed", []string{"-", "-"}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := topologyCluster(int32(len(tc.placed)), spec, block(tc.placed...))
			conf, warnings := networkTopology(in)
			sizes := ""
			base := 0
			for _, line := range strings.Split(conf, "\n") {
				if strings.HasPrefix(line, "BlockSizes=") {
					sizes = line
					fmt.Sscanf(line, "BlockSizes=%d", &base)
				}
			}
			if sizes != tc.wantSizes {
				t.Fatalf("got %q, want %q:\n%s", sizes, tc.wantSizes, conf)
			}
			for _, line := range strings.Split(conf, "\n") {
				if !strings.HasPrefix(line, "BlockName=") {
					continue
				}
				nodes := strings.TrimPrefix(line[strings.Index(line, " Nodes="):], " Nodes=")
				if n := hostCount(t, nodes); n < base {
					t.Errorf("%q has %d workers, fewer than the base %d", line, n, base)
				}
			}
			if (len(warnings) > 0) != tc.warn {
				t.Errorf("warnings %q, want some: %v", warnings, tc.warn)
			}
			if tc.warn && !strings.Contains(warnings[0], "spec.slurmConfig.topology.blockSizes") {
				t.Errorf("the warning does not name the field: %s", warnings[0])
			}
		})
	}
}

// hostCount counts the names of a hostlist expression this package writes.
func hostCount(t *testing.T, list string) int {
	t.Helper()
	open := strings.Index(list, "[")
	if open < 0 {
		return 1
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSuffix(list[open+1:], "]"), ",") {
		var a, b int
		if _, err := fmt.Sscanf(part, "%d-%d", &a, &b); err == nil {
			n += b - a + 1
		} else {
			n++
		}
	}
	return n
}

func TestWorkersLeftOutOfTheNodeListAreLeftOutOfTheTopology(t *testing.T) {
	in := topologyCluster(2, &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyBlock, BlockLabel: cliqueLabel}, block("a", "a", "a", "a"))
	conf, _ := networkTopology(in)
	if !strings.Contains(conf, "BlockName=a Nodes=worker-[0-1]\n") {
		t.Fatalf("workers 2 and 3 are not in slurm.conf and must not be in a block:\n%s", conf)
	}
}

// A tree's switch names are unique across levels (Slurm refuses a name defined twice), the root
// included, and within Slurm's 64 characters.
func TestSwitchNamesAreUnique(t *testing.T) {
	long := strings.Repeat("x", 63)
	in := topologyCluster(3, &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyTree, SwitchLabels: []string{leafLabel, spineLabel}},
		map[int]map[string]string{
			0: {leafLabel: "root", spineLabel: "root"},
			1: {leafLabel: long, spineLabel: long},
			2: {leafLabel: "b", spineLabel: "c"},
		})
	conf, _ := networkTopology(in)
	seen := map[string]bool{}
	for _, line := range strings.Split(conf, "\n") {
		name, ok := strings.CutPrefix(strings.Fields(line + " x")[0], "SwitchName=")
		if !ok {
			continue
		}
		if seen[name] || len(name) > maxSwitchName {
			t.Errorf("switch name %q repeated or longer than %d:\n%s", name, maxSwitchName, conf)
		}
		seen[name] = true
	}
	if len(seen) != 7 {
		t.Fatalf("want 3 leaves, 3 spines and a root, got %d switches:\n%s", len(seen), conf)
	}
}

func TestNodeListCompressesRuns(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{3}, "worker-3"},
		{[]int{0, 1}, "worker-[0-1]"},
		{[]int{6, 0, 2, 4, 5}, "worker-[0,2,4-6]"},
	} {
		if got := NodeList("worker", tc.in); got != tc.want {
			t.Errorf("NodeList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := hostCount(t, "worker-[0,2,4-6]"); !reflect.DeepEqual(got, 5) {
		t.Errorf("hostCount = %d", got)
	}
}

// A spine whose only leaf goes under another spine (most of the leaf's nodes name that one) has
// no children left: it is not written, since Slurm refuses a switch without children.
func TestASwitchLeftWithoutChildrenIsNotWritten(t *testing.T) {
	in := topologyCluster(3, &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyTree, SwitchLabels: []string{leafLabel, spineLabel}},
		map[int]map[string]string{
			0: {leafLabel: "leaf1", spineLabel: "spine1"},
			1: {leafLabel: "leaf1", spineLabel: "spine1"},
			2: {leafLabel: "leaf1", spineLabel: "spine2"},
		})
	conf, warnings := networkTopology(in)
	for _, line := range strings.Split(conf, "\n") {
		if strings.HasSuffix(line, "=") || strings.Contains(line, "spine2") {
			t.Errorf("line %q: a switch without children, or the emptied spine2:\n%s", line, conf)
		}
	}
	if !strings.Contains(conf, "SwitchName=spine1 Switches=leaf1\n") || strings.Contains(conf, "SwitchName=root") {
		t.Errorf("want leaf1 under spine1, the only top switch:\n%s", conf)
	}
	if len(warnings) != 1 {
		t.Errorf("want one warning for leaf1's two spines, got %q", warnings)
	}
}
