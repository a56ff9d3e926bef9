package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// slurmctld's own words when its job state file is cut short (job_mgr.c, Slurm 24.11), as the
// kubelet keeps them: the container's last log lines.
const cutShortLog = "slurmctld: Recovered state of 2 nodes\n" +
	"slurmctld: fatal: Incomplete job state save file, start with '-i' to ignore this. Warning: using -i will lose the data that can't be recovered.\n"

func TestAControllerPodThatCannotReadItsStateIsNamedWithSlurmctldsWords(t *testing.T) {
	pod := func(name string, st corev1.ContainerStatus) corev1.Pod {
		st.Name = slurmctldContainer
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}}
	}
	crashed := func(msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: msg}},
		}
	}
	got := stateUnreadable([]corev1.Pod{
		pod("c-controller-1", crashed(cutShortLog)),
		pod("c-controller-0", corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: cutShortLog}}}),
		// Stopped for another reason: not this.
		pod("c-controller-2", crashed("slurmctld: fatal: Unable to bind listen port (6817): Address already in use\n")),
		// Running again (the state was restored): its last stop no longer counts.
		pod("c-controller-3", corev1.ContainerStatus{
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: cutShortLog}},
		}),
	})
	line := "slurmctld: fatal: Incomplete job state save file, start with '-i' to ignore this. Warning: using -i will lose the data that can't be recovered."
	if len(got) != 2 || got[0] != "c-controller-0: "+line || got[1] != "c-controller-1: "+line {
		t.Fatalf("stateUnreadable:\n%q", got)
	}
	if msg := stateUnreadableMessage(got); !strings.Contains(msg, "restore StateSaveLocation") || !strings.Contains(msg, "c-controller-0") {
		t.Errorf("message: %s", msg)
	}

	// The cache keeps that line of the message, and nothing else of it.
	slim, err := slimPod(&corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: slurmctldContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: cutShortLog}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if m := slim.(*corev1.Pod).Status.ContainerStatuses[0].LastTerminationState.Terminated.Message; m != line {
		t.Errorf("the cache kept %q", m)
	}
}
