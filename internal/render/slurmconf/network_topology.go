package slurmconf

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// TopologyConf is the network topology file slurmctld reads with TopologyPlugin set.
const TopologyConf = "topology.conf"

// Names the topology gives to what no label names. Workers on nodes labelled "unlabelled" join
// the unlabelled ones; the root takes another name when a switch is labelled "root" (uniqueName).
const (
	// UnlabelledGroup is the block, or leaf switch, of workers on nodes without the label.
	UnlabelledGroup = "unlabelled"
	// RootSwitch joins the tree's top switches, so that a job may span the whole cluster.
	RootSwitch = "root"
)

// defaultBlockLevels are the multiples of the base block size Slurm plans with when BlockSizes
// is not set (its own default: the base, then 2, 4, 8 and 16 times it).
var defaultBlockLevels = []int32{1, 2, 4, 8, 16}

// maxSwitchName is Slurm's limit on a switch name's length.
const maxSwitchName = 64

// networkTopology renders topology.conf from where the workers run, with the warnings the
// controller reports (a block below the base size, a switch labelled under two parents).
func networkTopology(in base.Input) (string, []string) {
	t := in.Cluster.Spec.SlurmConfig.Topology
	if t == nil {
		return "", nil
	}
	w := newWriter(generatedHeader + "\nBuilt from the labels of the Kubernetes nodes the workers run on; a worker whose pod is on\nno node yet is left out until it is.")
	placed := placedWorkers(in)
	var warnings []string
	if t.Plugin == slurmv1alpha1.TopologyBlock {
		warnings = blockTopology(w, t, setNames(in), placed)
	} else {
		warnings = treeTopology(w, t, setNames(in), placed)
	}
	return w.String(), warnings
}

// TopologyWarnings are what the rendered topology could not follow of the spec.
func TopologyWarnings(in base.Input) []string {
	_, warnings := networkTopology(in)
	return warnings
}

// placed is a worker's key (setKey) and its node's topology labels.
type placed struct {
	index  int
	labels map[string]string
}

// setKey orders the workers of every set in one sequence: set k's worker i is
// k*setKeyStride + i (a set has at most 4096 workers).
const setKeyStride = 1 << 20

// placedWorkers are the workers rendered in slurm.conf that run on a node, by set and index.
func placedWorkers(in base.Input) []placed {
	var out []placed
	for _, p := range in.Placements {
		for k, set := range in.WorkerSets() {
			rest, ok := strings.CutPrefix(p.Name, set.Name+"-")
			i, err := strconv.Atoi(rest)
			if !ok || err != nil || i < 0 || i >= int(in.WorkerCountOf(set)) {
				continue
			}
			out = append(out, placed{index: k*setKeyStride + i, labels: p.Labels})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].index < out[b].index })
	return out
}

// blockTopology writes a block per value of the block label, in the values' order (Slurm pairs
// neighbouring blocks into larger ones, and sites name neighbouring racks alike), the workers
// on unlabelled nodes last, then BlockSizes.
func blockTopology(w *writer, t *slurmv1alpha1.NetworkTopology, sets []string, workers []placed) []string {
	groups := map[string][]int{}
	for _, p := range workers {
		v := p.labels[t.BlockLabel]
		if v == "" {
			v = UnlabelledGroup
		}
		groups[v] = append(groups[v], p.index)
	}
	if len(groups) == 0 {
		w.comment("No worker runs on a node yet.")
		return nil
	}
	names := make([]string, 0, len(groups))
	for v := range groups {
		if v != UnlabelledGroup {
			names = append(names, v)
		}
	}
	sort.Strings(names)
	if _, ok := groups[UnlabelledGroup]; ok {
		names = append(names, UnlabelledGroup)
	}
	smallest, smallestName := int32(0), ""
	for _, name := range names {
		w.line("BlockName=" + name + " Nodes=" + setNodeList(sets, groups[name]))
		if n := int32(len(groups[name])); smallest == 0 || n < smallest {
			smallest, smallestName = n, name
		}
	}
	sizes, warning := blockSizes(t.BlockSizes, smallest, smallestName)
	words := make([]string, len(sizes))
	for i, s := range sizes {
		words[i] = strconv.Itoa(int(s))
	}
	w.line("BlockSizes=" + strings.Join(words, ","))
	if warning != "" {
		return []string{warning}
	}
	return nil
}

// blockSizes are the BlockSizes written: the spec's, or the smallest block's count and Slurm's
// default multiples of it; with a block smaller than the spec's base (which Slurm 24.11 refuses
// to start with), the spec's ratios on that block's count.
func blockSizes(spec []int32, smallest int32, smallestName string) ([]int32, string) {
	if len(spec) == 0 {
		out := make([]int32, len(defaultBlockLevels))
		for i, m := range defaultBlockLevels {
			out[i] = smallest * m
		}
		return out, ""
	}
	sorted := append([]int32(nil), spec...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
	base := sorted[0]
	if smallest >= base {
		return sorted, ""
	}
	out := make([]int32, len(sorted))
	for i, s := range sorted {
		out[i] = smallest * (s / base)
	}
	return out, fmt.Sprintf("topology: block %s has %d workers, fewer than the base block size %d (spec.slurmConfig.topology.blockSizes); Slurm plans with a base of %d until it has %d", smallestName, smallest, base, smallest, base)
}

// treeTopology writes a leaf switch per value of the first switch label, each under the switch
// its nodes' next label names, and so on up; every switch without a parent goes under one
// root. A worker's chain ends at the first level its node has no label for; a worker on a node
// without the leaf label is under the leaf switch "unlabelled".
func treeTopology(w *writer, t *slurmv1alpha1.NetworkTopology, sets []string, workers []placed) []string {
	if len(workers) == 0 {
		w.comment("No worker runs on a node yet.")
		return nil
	}
	type key = switchKey
	leaves := map[key][]int{}
	// parents counts, for each switch, the workers whose labels put it under each parent.
	parents := map[key]map[key]int{}
	for _, p := range workers {
		chain := []key{{0, UnlabelledGroup}}
		if v := p.labels[t.SwitchLabels[0]]; v != "" {
			chain[0].value = v
			for l := 1; l < len(t.SwitchLabels); l++ {
				v := p.labels[t.SwitchLabels[l]]
				if v == "" {
					break
				}
				chain = append(chain, key{l, v})
			}
		}
		leaves[chain[0]] = append(leaves[chain[0]], p.index)
		for i, k := range chain {
			if parents[k] == nil {
				parents[k] = map[key]int{}
			}
			if i+1 < len(chain) {
				parents[k][chain[i+1]]++
			}
		}
	}
	// Every switch, by level then value; names unique across levels.
	keys := make([]key, 0, len(parents))
	for k := range parents {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].level != keys[b].level {
			return keys[a].level < keys[b].level
		}
		return keys[a].value < keys[b].value
	})
	// Each switch's parent is the one most of its workers name. A switch all of whose children
	// went under another parent is left out: Slurm refuses a switch without children (and the
	// switch above it may then have none either, so levels are settled from the leaves up).
	var warnings []string
	parentOf := map[key]key{}
	children := map[key][]key{}
	for _, k := range keys {
		parent, ok := mostCommon(parents[k])
		if !ok {
			continue
		}
		parentOf[k] = parent
		children[parent] = append(children[parent], k)
		if len(parents[k]) > 1 {
			var others []string
			for o := range parents[k] {
				if o != parent {
					others = append(others, o.value)
				}
			}
			sort.Strings(others)
			warnings = append(warnings, fmt.Sprintf("topology: switch %s is labelled (%s) under %s and under %s; Slurm's topology is a tree, so it is put under %s",
				k.value, t.SwitchLabels[k.level+1], parent.value, strings.Join(others, ", "), parent.value))
		}
	}
	live := map[key]bool{}
	for _, k := range keys { // by level: a switch's children come before it
		if k.level == 0 {
			live[k] = true
			continue
		}
		for _, c := range children[k] {
			live[k] = live[k] || live[c]
		}
	}
	used := map[string]bool{}
	names := map[key]string{}
	for _, k := range keys {
		if live[k] {
			names[k] = uniqueName(k.value, k.level, used)
		}
	}
	var tops []string
	for _, k := range keys {
		if !live[k] {
			continue
		}
		if _, ok := parentOf[k]; !ok {
			tops = append(tops, names[k])
		}
		if k.level == 0 {
			w.line("SwitchName=" + names[k] + " Nodes=" + setNodeList(sets, leaves[k]))
			continue
		}
		var kids []string
		for _, c := range children[k] {
			if live[c] {
				kids = append(kids, names[c])
			}
		}
		w.line("SwitchName=" + names[k] + " Switches=" + strings.Join(kids, ","))
	}
	if len(tops) > 1 {
		w.comment("One root over the top switches: a job may still span the whole cluster.")
		w.line("SwitchName=" + uniqueName(RootSwitch, len(t.SwitchLabels), used) + " Switches=" + strings.Join(tops, ","))
	}
	return warnings
}

// switchKey is a switch: its level (0 for a leaf) and its label value.
type switchKey struct {
	level int
	value string
}

// mostCommon is the parent most of a switch's workers name (the first by value on a tie).
func mostCommon(counts map[switchKey]int) (switchKey, bool) {
	var best switchKey
	found, bestN := false, 0
	keys := make([]switchKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a].value < keys[b].value })
	for _, k := range keys {
		if counts[k] > bestN {
			best, bestN, found = k, counts[k], true
		}
	}
	return best, found
}

// uniqueName is value as a switch name, or, when another level has it already, value with its
// level appended ("a-l1"), within Slurm's 64 characters.
func uniqueName(value string, level int, used map[string]bool) string {
	name := value
	for n := 0; used[name]; n++ {
		suffix := fmt.Sprintf("-l%d", level)
		if n > 0 {
			suffix = fmt.Sprintf("-l%d-%d", level, n)
		}
		if len(value)+len(suffix) > maxSwitchName {
			name = value[:maxSwitchName-len(suffix)] + suffix
		} else {
			name = value + suffix
		}
	}
	used[name] = true
	return name
}

// setNames are the worker sets' names in order (the sets of setKey).
func setNames(in base.Input) []string {
	var out []string
	for _, s := range in.WorkerSets() {
		out = append(out, s.Name)
	}
	return out
}

// setNodeList is NodeList over the workers of several sets, given by setKey: each set's
// expression, comma-separated, in the sets' order.
func setNodeList(sets []string, keys []int) string {
	bySet := map[int][]int{}
	for _, k := range keys {
		bySet[k/setKeyStride] = append(bySet[k/setKeyStride], k%setKeyStride)
	}
	var parts []string
	for k, name := range sets {
		if len(bySet[k]) > 0 {
			parts = append(parts, NodeList(name, bySet[k]))
		}
	}
	return strings.Join(parts, ",")
}

// NodeList is Slurm's hostlist expression for prefix-i of each index, sorted: "worker-[0,2,4-6]",
// or "worker-3" for one.
func NodeList(prefix string, indices []int) string {
	idx := append([]int(nil), indices...)
	sort.Ints(idx)
	if len(idx) == 1 {
		return fmt.Sprintf("%s-%d", prefix, idx[0])
	}
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return prefix + "-[" + strings.Join(parts, ",") + "]"
}
