package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// A node's label change reaches the clusters when it is a GPU label or a label a cluster's
// topology names (as its last render found), and only then.
func TestNodeLabelChangesThatMatter(t *testing.T) {
	r := &SlurmClusterReconciler{}
	sc := &slurmv1alpha1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "hpc", Name: "demo"}}
	r.topologyLabels.Store(client.ObjectKeyFromObject(sc), []string{"leaf", "spine"})
	p := nodeChangeMatters(r.isTopologyLabel, func() {})
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
	}
	for _, tc := range []struct {
		name     string
		old, new map[string]string
		want     bool
	}{
		{"a leaf label set", map[string]string{"a": "1"}, map[string]string{"a": "1", "leaf": "l1"}, true},
		{"a spine label changed", map[string]string{"spine": "s1"}, map[string]string{"spine": "s2"}, true},
		{"a leaf label removed", map[string]string{"leaf": "l1"}, map[string]string{}, true},
		{"a GPU label changed", map[string]string{"nvidia.com/gpu.count": "8"}, map[string]string{"nvidia.com/gpu.count": "7"}, true},
		{"another label changed", map[string]string{"team": "a"}, map[string]string{"team": "b"}, false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: node(tc.old), ObjectNew: node(tc.new)}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// The cluster drops its topology: its labels no longer matter.
	r.topologyLabels.Delete(client.ObjectKeyFromObject(sc))
	if p.Update(event.UpdateEvent{ObjectOld: node(map[string]string{"leaf": "l1"}), ObjectNew: node(map[string]string{"leaf": "l2"})}) {
		t.Error("a leaf label change reached the clusters after the topology was dropped")
	}
}
