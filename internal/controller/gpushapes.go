package controller

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/gpu"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// shapeMemo keeps each worker set's GPU shape until a node changes in a way that can change
// it (it appears or leaves, a label or its allocatable GPUs change) or the set's own inputs
// change (its filter, its gpu field, its place in the spec). Without it every reconcile of
// every cluster walks every node once per set: with thousands of GPU nodes and hundreds of
// clusters that is most of the operator's work after a burst of node events.
//
// The node generation is bumped by the node watch's predicate, which runs before the event
// it judges enqueues any reconcile: a reconcile a node change causes always finds the memo
// already stale. A shape computed from a list read before a bump is stored under the older
// generation and so is never served after it.
type shapeMemo struct {
	nodes atomic.Uint64 // bumped for every node change that can change a shape

	mu      sync.Mutex
	gen     uint64 // the node generation the entries were computed at
	entries map[string]shapeEntry

	computed atomic.Uint64 // shapes computed (not served from the memo), for tests and benchmarks
}

type shapeEntry struct {
	inputs string // what the set's shape depends on in the spec
	result gpu.Result
}

func newShapeMemo() *shapeMemo { return &shapeMemo{entries: map[string]shapeEntry{}} }

// nodesChanged marks every memoised shape stale.
func (m *shapeMemo) nodesChanged() { m.nodes.Add(1) }

// generation is read before the nodes are listed, and passed to store with what they gave.
func (m *shapeMemo) generation() uint64 { return m.nodes.Load() }

// lookup returns the shape of the cluster's set if it was computed at the current node
// generation from the same inputs.
func (m *shapeMemo) lookup(key, inputs string) (gpu.Result, bool) {
	gen := m.nodes.Load()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gen != gen {
		return gpu.Result{}, false
	}
	e, ok := m.entries[key]
	if !ok || e.inputs != inputs {
		return gpu.Result{}, false
	}
	return e.result, true
}

// store keeps a shape computed from nodes listed at generation gen. Entries of older
// generations are dropped; a shape from a list older than the newest entries is not kept.
func (m *shapeMemo) store(gen uint64, key, inputs string, r gpu.Result) {
	m.computed.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case gen < m.gen:
		return
	case gen > m.gen:
		m.gen, m.entries = gen, map[string]shapeEntry{}
	}
	m.entries[key] = shapeEntry{inputs: inputs, result: r}
}

// forget drops a deleted cluster's shapes.
func (m *shapeMemo) forget(namespace, name string) {
	prefix := namespace + "/" + name + "/"
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.entries {
		if strings.HasPrefix(k, prefix) {
			delete(m.entries, k)
		}
	}
}

// shapeKey names a set of a cluster in the memo.
func shapeKey(sc *slurmv1alpha1.SlurmCluster, set slurmv1alpha1.WorkerSet) string {
	return sc.Namespace + "/" + sc.Name + "/" + set.Name
}

// shapeInputs is what gpu.FindSet reads of the spec for a set besides the nodes: the set's
// filter, its gpu field and its index (for the field path in messages).
func shapeInputs(sc *slurmv1alpha1.SlurmCluster, set slurmv1alpha1.WorkerSet) string {
	index := -1
	for i, ns := range sc.Spec.SlurmNodes.NodeSets {
		if ns.Name == set.Name && !set.Default() {
			index = i
		}
	}
	b, err := json.Marshal(struct {
		Filter *slurmv1alpha1.K8sNodeFilter
		GPU    *int32
		Index  int
	}{base.NodeFilter(sc, set.Worker.K8sNodeFilterName), set.Worker.GPU, index})
	if err != nil { // a spec type that does not marshal: never share a shape
		return ""
	}
	return string(b)
}

// shapeRelevantNodeChange says whether a node update can change a GPU shape: a label (the
// shape's or a filter's) or the allocatable GPUs.
func shapeRelevantNodeChange(oldN, newN *corev1.Node) bool {
	if len(oldN.Labels) != len(newN.Labels) {
		return true
	}
	for k, v := range newN.Labels {
		if ov, ok := oldN.Labels[k]; !ok || ov != v {
			return true
		}
	}
	oldQ := oldN.Status.Allocatable[slurmfacts.GPUResource]
	newQ := newN.Status.Allocatable[slurmfacts.GPUResource]
	return oldQ.Cmp(newQ) != 0
}
