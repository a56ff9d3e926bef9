package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

func TestWhatKeepsANodeFromRunningJobs(t *testing.T) {
	node := func(cordoned bool, ready corev1.ConditionStatus, gpus string) *corev1.Node {
		n := &corev1.Node{}
		n.Spec.Unschedulable = cordoned
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		}
		if gpus != "" {
			n.Status.Allocatable = corev1.ResourceList{slurmfacts.GPUResource: resource.MustParse(gpus)}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		n    *corev1.Node
		gpus int64
		want string
	}{
		{"healthy CPU node", node(false, corev1.ConditionTrue, ""), 0, ""},
		{"healthy GPU node", node(false, corev1.ConditionTrue, "8"), 8, ""},
		{"cordoned", node(true, corev1.ConditionTrue, "8"), 8, "is cordoned"},
		{"not ready", node(false, corev1.ConditionFalse, "8"), 8, "is not ready"},
		{"never reported", node(false, "", ""), 0, "is not ready"},
		{"a GPU taken out by the device plugin", node(false, corev1.ConditionTrue, "7"), 8, "has 7 of 8 GPUs allocatable"},
		{"GPUs not checked on a CPU-only cluster", node(false, corev1.ConditionTrue, "0"), 0, ""},
	} {
		if got := nodeProblem(tc.n, tc.gpus); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
