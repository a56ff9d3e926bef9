package controller

import (
	"strings"
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
		if got := nodeProblem(tc.n, tc.gpus, nil); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A condition the admin names drains the node while it is True, with its words; others, and the
// named ones when False, do not. Cordoned and not ready come first.
func TestNamedNodeConditionsKeepANodeFromRunningJobs(t *testing.T) {
	named := []string{"KernelDeadlock", "example.com/GPUProblem"}
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		n := &corev1.Node{}
		n.Status.Conditions = append([]corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, conds...)
		return n
	}
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		n    *corev1.Node
		want string
	}{
		{"named, True", node(corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionTrue, Reason: "DockerHung", Message: "task docker:7 blocked\nfor more than 120 seconds."}),
			"has condition KernelDeadlock (DockerHung: task docker:7 blocked for more than 120 seconds.)"},
		{"named, False", node(corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionFalse, Reason: "KernelHasNoDeadlock"}), ""},
		{"named, Unknown", node(corev1.NodeCondition{Type: "example.com/GPUProblem", Status: corev1.ConditionUnknown}), ""},
		{"not named, True", node(corev1.NodeCondition{Type: "FrequentKubeletRestart", Status: corev1.ConditionTrue}), ""},
		{"named, True, no words", node(corev1.NodeCondition{Type: "example.com/GPUProblem", Status: corev1.ConditionTrue}), "has condition example.com/GPUProblem"},
		{"named, True, a long message", node(corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionTrue, Message: long}),
			"has condition KernelDeadlock (" + strings.Repeat("x", maxConditionText-1) + "…)"},
	} {
		if got := nodeProblem(tc.n, 0, named); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	cordoned := node(corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionTrue})
	cordoned.Spec.Unschedulable = true
	if got := nodeProblem(cordoned, 0, named); got != "is cordoned" {
		t.Errorf("cordoned with a named condition: %q", got)
	}
}
