package controller

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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

func TestWhichMissingPodsKubernetesRefusedToCreate(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Date(2026, 12, 6, 1, 0, sec, 0, time.UTC)) }
	ev := func(reason, msg string, last metav1.Time) corev1.Event {
		return corev1.Event{Reason: reason, Message: msg, LastTimestamp: last}
	}
	quota := `pods "c-burst-1" is forbidden: exceeded quota: q, requested: pods=1, used: pods=9, limited: pods=9`
	// Kubernetes 1.37 writes "Create Pod …", older releases "create Pod …": both are read.
	events := []corev1.Event{
		// burst-0: refused, then created: a pod missing now (replaced) is not refused.
		ev("FailedCreate", "create Pod c-burst-0 in StatefulSet c-burst failed error: denied", at(1)),
		ev("SuccessfulCreate", "create Pod c-burst-0 in StatefulSet c-burst successful", at(2)),
		// burst-1: created once, then refused (the event aggregated).
		ev("SuccessfulCreate", "create Pod c-burst-1 in StatefulSet c-burst successful", at(1)),
		ev("FailedCreate", "(combined from similar events): Create Pod c-burst-1 in StatefulSet c-burst failed error: "+quota, at(5)),
		// burst-2: its claim refused (a new-style event: its time is in eventTime).
		{Reason: "FailedCreate", Message: `Create Claim spool-c-burst-2 for Pod c-burst-2 in StatefulSet c-burst failed error: persistentvolumeclaims "spool-c-burst-2" is forbidden: exceeded quota`,
			EventTime: metav1.NewMicroTime(at(3).Time)},
		// burst-3: a failure and a success in the same second: the success counts.
		ev("FailedCreate", "create Pod c-burst-3 in StatefulSet c-burst failed error: denied", at(4)),
		ev("SuccessfulCreate", "create Pod c-burst-3 in StatefulSet c-burst successful", at(4)),
		// burst-4: its claim created, then the pod refused; burst-5 refused but it exists.
		ev("SuccessfulCreate", "Create Claim spool-c-burst-4 Pod c-burst-4 in StatefulSet c-burst success", at(6)),
		ev("FailedCreate", "create Pod c-burst-4 in StatefulSet c-burst failed error: denied", at(6)),
		ev("FailedCreate", "create Pod c-burst-5 in StatefulSet c-burst failed error: denied", at(6)),
		ev("SuccessfulDelete", "delete Pod c-burst-6 in StatefulSet c-burst successful", at(7)),
	}
	missing := map[string]string{"c-burst-0": "burst-0", "c-burst-1": "burst-1", "c-burst-2": "burst-2", "c-burst-3": "burst-3", "c-burst-4": "burst-4", "c-burst-6": "burst-6"}
	got := refusedPods(missing, events)
	want := map[string]string{
		"c-burst-1": "FailedCreate: " + quota,
		"c-burst-2": `FailedCreate: persistentvolumeclaims "spool-c-burst-2" is forbidden: exceeded quota`,
		"c-burst-4": "FailedCreate: denied",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refusedPods:\n%q\nwant\n%q", got, want)
	}
}

func TestASetLacksPodsOnlyOnceItsControllerSawItsSpec(t *testing.T) {
	set := func(generation, observed int64, replicas, have int32) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)}}
		s.Generation, s.Status.ObservedGeneration, s.Status.Replicas = generation, observed, have
		return s
	}
	for name, tc := range map[string]struct {
		sts  *appsv1.StatefulSet
		size int32
		want bool
	}{
		"a scale-up the StatefulSet controller has not seen yet":     {set(3, 2, 2, 1), 2, false},
		"seen, and a pod short (refused, say)":                       {set(3, 3, 2, 1), 2, true},
		"seen, every pod there":                                      {set(3, 3, 2, 2), 2, false},
		"pods above the set's size (leaving) do not count as wanted": {set(3, 3, 4, 2), 2, false},
		"no StatefulSet": {nil, 2, false},
		"a pod short within the size, more pods wanted above the size": {set(3, 3, 4, 1), 2, true},
	} {
		if got := mayLackPods(tc.sts, tc.size); got != tc.want {
			t.Errorf("%s: mayLackPods = %v, want %v", name, got, tc.want)
		}
	}
}
