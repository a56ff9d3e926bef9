package controller

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// The cache keeps a node's problem conditions (True, not Ready), their messages bounded, and
// drops the rest; a heartbeat is no change worth a reconcile, a new problem is.
func TestTheNodeCacheKeepsProblemConditions(t *testing.T) {
	n := &corev1.Node{}
	n.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: "KernelDeadlock", Status: corev1.ConditionTrue, Reason: "DockerHung", Message: strings.Repeat("é", 400)},
	}
	out, err := slimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*corev1.Node)
	if len(slim.Status.Conditions) != 2 || slim.Status.Conditions[0].Type != corev1.NodeReady || slim.Status.Conditions[1].Type != "KernelDeadlock" {
		t.Fatalf("kept conditions: %+v", slim.Status.Conditions)
	}
	if m := slim.Status.Conditions[1].Message; len(m) > 512 || !utf8.ValidString(m) || slim.Status.Conditions[1].Reason != "DockerHung" {
		t.Errorf("the problem's words: %d bytes, valid %t, reason %q", len(m), utf8.ValidString(m), slim.Status.Conditions[1].Reason)
	}
	beat := n.DeepCopy()
	beat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	if problemConditions(beat) != problemConditions(n) {
		t.Error("a heartbeat changed the node's problems")
	}
	worse := n.DeepCopy()
	worse.Status.Conditions = append(worse.Status.Conditions, corev1.NodeCondition{Type: "ReadonlyFilesystem", Status: corev1.ConditionTrue})
	if problemConditions(worse) == problemConditions(n) {
		t.Error("a new problem condition went unnoticed")
	}
}
