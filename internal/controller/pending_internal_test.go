package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

func TestWhichWorkerPodsCannotStartAndWhetherSlurmdEverRegistered(t *testing.T) {
	pod := func(i string, phase corev1.PodPhase, st corev1.PodStatus) corev1.Pod {
		st.Phase = phase
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-worker-" + i, Labels: map[string]string{base.LabelPodIndex: i}}, Status: st}
	}
	unschedulable := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}}
	pullFails := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "slurmd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "back-off pulling"}}}}}
	creating := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "slurmd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}
	running := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "slurmd", Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	waitingForSlurmctld := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "slurmd", Started: ptr.To(false), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	restarted := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "slurmd", Started: ptr.To(false), RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}

	got := pendingWorkers([]corev1.Pod{
		pod("3", corev1.PodPending, unschedulable),
		pod("1", corev1.PodPending, pullFails),
		pod("2", corev1.PodPending, creating),      // on its way: not reported
		pod("4", corev1.PodPending, unschedulable), // above the size: leaving, not reported
		pod("0", corev1.PodRunning, running),
	}, func(p corev1.Pod) bool { return ordinal(p) < 4 })
	want := []string{
		"pod c-worker-1 (Slurm node worker-1) cannot start: ImagePullBackOff: back-off pulling",
		"pod c-worker-3 (Slurm node worker-3) cannot start: Unschedulable: 0/3 nodes are available",
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("pendingWorkers:\n%q\nwant\n%q", got, want)
	}

	for name, tc := range map[string]struct {
		st   corev1.PodStatus
		want bool
	}{
		"unschedulable, no status yet":                       {unschedulable, true},
		"its image not pulled":                               {pullFails, true},
		"running, slurmd waiting for slurmctld to list it":   {waitingForSlurmctld, true},
		"registered (the startup probe passed)":              {running, false},
		"restarted: it may have run jobs in its earlier run": {restarted, false},
	} {
		if got := slurmdNeverRegistered(pod("1", corev1.PodPending, tc.st)); got != tc.want {
			t.Errorf("%s: never registered = %v, want %v", name, got, tc.want)
		}
	}
}
