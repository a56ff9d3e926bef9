package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/gpu"
)

// nodeLister answers List for nodes from a slice, as the manager's cache does (read-only),
// and counts the lists.
type nodeLister struct {
	client.Client
	nodes []corev1.Node
	lists int
}

func (l *nodeLister) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	nl, ok := list.(*corev1.NodeList)
	if !ok {
		return fmt.Errorf("nodeLister lists nodes only, not %T", list)
	}
	l.lists++
	nl.Items = l.nodes
	return nil
}

func gpuNode(name, pool, product string, count int) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pool": pool, gpu.LabelPresent: "true", gpu.LabelProduct: product, gpu.LabelCount: fmt.Sprint(count),
	}}}
}

// shapeCluster has workers on the pool=h100 nodes and a set a100 on the pool=a100 nodes.
func shapeCluster(name string) *slurmv1alpha1.SlurmCluster {
	sc := &slurmv1alpha1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: name}}
	sc.Spec.K8sNodeFilters = []slurmv1alpha1.K8sNodeFilter{
		{Name: "h100", NodeSelector: map[string]slurmv1alpha1.LabelValue{"pool": "h100"}},
		{Name: "a100", NodeSelector: map[string]slurmv1alpha1.LabelValue{"pool": "a100"}},
	}
	sc.Spec.SlurmNodes.Worker.Size = 2
	sc.Spec.SlurmNodes.Worker.K8sNodeFilterName = "h100"
	sc.Spec.SlurmNodes.NodeSets = []slurmv1alpha1.NodeSet{{Name: "a100", Size: 1, K8sNodeFilterName: "a100"}}
	return sc
}

func findShapes(t testing.TB, r *SlurmClusterReconciler, sc *slurmv1alpha1.SlurmCluster) *observed {
	t.Helper()
	s := &reconcileScope{desired: sc, facts: &observed{}}
	if err := r.findGPUShape(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s.facts
}

// A set's GPU shape is computed once per node change and once per change of its own inputs,
// not on every reconcile; a node event the watch drops (a heartbeat) keeps it, one it drops
// but that can change a shape (a filter's label) does not.
func TestGPUShapeIsComputedOncePerChange(t *testing.T) {
	nodes := &nodeLister{nodes: []corev1.Node{
		gpuNode("h-0", "h100", "NVIDIA-H100-80GB-HBM3", 8), gpuNode("h-1", "h100", "NVIDIA-H100-80GB-HBM3", 8),
		gpuNode("a-0", "a100", "NVIDIA-A100-SXM4-80GB", 4), gpuNode("a-1", "a100", "NVIDIA-A100-SXM4-80GB", 4),
	}}
	r := &SlurmClusterReconciler{Client: nodes, shapes: newShapeMemo()}
	p := nodeChangeMatters(func(string) bool { return false }, r.shapes.nodesChanged)
	sc := shapeCluster("demo")

	check := func(step string, wantLists int, wantComputed uint64, wantWorker, wantSet string) {
		t.Helper()
		o := findShapes(t, r, sc)
		if nodes.lists != wantLists || r.shapes.computed.Load() != wantComputed {
			t.Errorf("%s: %d lists and %d shapes computed so far, want %d and %d", step, nodes.lists, r.shapes.computed.Load(), wantLists, wantComputed)
		}
		if got := fmt.Sprintf("%d %s", o.gpu.GPU.Count, o.gpu.GPU.Type); got != wantWorker {
			t.Errorf("%s: workers' shape %q, want %q", step, got, wantWorker)
		}
		if got := fmt.Sprintf("%d %s %s", o.setGPUs["a100"].GPU.Count, o.setGPUs["a100"].GPU.Type, o.setGPUs["a100"].Reason); got != wantSet {
			t.Errorf("%s: set a100's shape %q, want %q", step, got, wantSet)
		}
	}
	check("first reconcile", 1, 2, "8 h100", "4 a100 FromNodeLabels")
	check("second reconcile", 1, 2, "8 h100", "4 a100 FromNodeLabels")

	for i := range nodes.nodes {
		nodes.nodes[i].Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
	heartbeat := nodes.nodes[2].DeepCopy()
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	if p.Update(event.UpdateEvent{ObjectOld: &nodes.nodes[2], ObjectNew: heartbeat}) {
		t.Error("a heartbeat was let through")
	}
	check("after a heartbeat", 1, 2, "8 h100", "4 a100 FromNodeLabels")

	// a-1 moves to another pool: no reconcile for it, but the set's shape must follow.
	moved := nodes.nodes[3].DeepCopy()
	moved.Labels["pool"] = "spare"
	p.Update(event.UpdateEvent{ObjectOld: &nodes.nodes[3], ObjectNew: moved})
	nodes.nodes[3] = *moved
	check("after a filter label changed", 2, 4, "8 h100", "4 a100 FromNodeLabels")

	// a-0 reports other GPUs: the set's nodes now disagree.
	changed := nodes.nodes[2].DeepCopy()
	changed.Labels[gpu.LabelCount] = "2"
	nodes.nodes[3].Labels["pool"] = "a100"
	if !p.Update(event.UpdateEvent{ObjectOld: &nodes.nodes[2], ObjectNew: changed}) {
		t.Error("a GPU count change was dropped")
	}
	nodes.nodes[2] = *changed
	check("after a GPU label changed", 3, 6, "8 h100", "2 a100 NodesDisagree")

	// Only the set whose spec changed is computed again.
	sc.Spec.SlurmNodes.NodeSets[0].GPU = ptr.To[int32](1)
	check("after the set's gpu changed", 4, 7, "8 h100", "1 a100 NodesDisagree")
	check("again", 4, 7, "8 h100", "1 a100 NodesDisagree")

	// Another cluster with the same spec has shapes of its own.
	other := shapeCluster("other")
	findShapes(t, r, other)
	if r.shapes.computed.Load() != 9 {
		t.Errorf("another cluster: %d shapes computed, want 9", r.shapes.computed.Load())
	}
	r.shapes.forget("hpc", "other")
	if _, ok := r.shapes.lookup(shapeKey(other, other.WorkerSets()[0]), shapeInputs(other, other.WorkerSets()[0])); ok {
		t.Error("a deleted cluster's shape is still memoised")
	}
}

// A shape computed from nodes listed before a node change is never served after it.
func TestGPUShapeFromAnOlderListIsNotKept(t *testing.T) {
	m := newShapeMemo()
	sc := shapeCluster("demo")
	set := sc.WorkerSets()[0]
	key, inputs := shapeKey(sc, set), shapeInputs(sc, set)
	gen := m.generation()
	m.nodesChanged() // a node changes while the shape is being computed
	m.store(gen, key, inputs, gpu.Result{Reason: "old"})
	if r, ok := m.lookup(key, inputs); ok {
		t.Fatalf("served %q, computed from nodes listed before the change", r.Reason)
	}
	m.store(m.generation(), key, inputs, gpu.Result{Reason: "new"})
	m.store(gen, key, inputs, gpu.Result{Reason: "old"})
	if r, ok := m.lookup(key, inputs); !ok || r.Reason != "new" {
		t.Fatalf("lookup = %q, %v; want the shape of the newer list", r.Reason, ok)
	}
}

// BenchmarkGPUShape is the GPU-shape phase of one reconcile of each of 200 clusters of three
// worker sets, over 5,000 GPU nodes, with no node change between reconciles: memoised, and
// computed every time (as before the memo). It reports the shapes computed per reconcile once
// each cluster's first reconcile has computed its own.
func BenchmarkGPUShape(b *testing.B) {
	var ns []corev1.Node
	for i := 0; i < 5000; i++ {
		pool, product, count := "h100", "NVIDIA-H100-80GB-HBM3", 8
		if i%4 == 0 {
			pool, product, count = "a100", "NVIDIA-A100-SXM4-80GB", 4
		}
		ns = append(ns, gpuNode(fmt.Sprintf("node-%d", i), pool, product, count))
	}
	var clusters []*slurmv1alpha1.SlurmCluster
	for i := 0; i < 200; i++ {
		sc := shapeCluster(fmt.Sprintf("c%d", i))
		sc.Spec.SlurmNodes.NodeSets = append(sc.Spec.SlurmNodes.NodeSets, slurmv1alpha1.NodeSet{Name: "cpu", Size: 4, GPU: ptr.To[int32](0)})
		clusters = append(clusters, sc)
	}
	for _, memo := range []bool{true, false} {
		name := "memoised"
		if !memo {
			name = "every-reconcile"
		}
		b.Run(name, func(b *testing.B) {
			r := &SlurmClusterReconciler{Client: &nodeLister{nodes: ns}}
			if memo {
				r.shapes = newShapeMemo()
			}
			for _, sc := range clusters { // the first reconcile of each computes its shapes
				findShapes(b, r, sc)
			}
			var before uint64
			if memo {
				before = r.shapes.computed.Load()
			}
			computed := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, sc := range clusters {
					findShapes(b, r, sc)
					if !memo {
						computed += len(sc.WorkerSets())
					}
				}
			}
			if memo {
				computed = int(r.shapes.computed.Load() - before)
			}
			b.ReportMetric(float64(computed)/float64(b.N*len(clusters)), "shapes/reconcile")
			b.ReportMetric(float64(b.N*len(clusters)), "reconciles")
		})
	}
}
