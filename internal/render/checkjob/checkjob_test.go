package checkjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

func TestTheJobRunsOnceOnTheWorkersNodeAndIsLeftToItsTimeToLive(t *testing.T) {
	sc := &slurmv1alpha1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "n", UID: "u"}}
	j := Job(sc, Params{Check: "dcgm", Script: "dcgmi diag -r 1", Image: "dcgm:4", Timeout: 5 * time.Minute,
		SlurmNode: "worker-3", Holder: 812, KubeNode: "gpu-7", Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}})
	pod := j.Spec.Template.Spec
	switch {
	case j.Name != "c-check-812" || j.Labels[LabelHolder] != "812" || pod.NodeName != "gpu-7" || len(pod.Tolerations) != 1:
		t.Errorf("name %s, labels %v, node %q, tolerations %v", j.Name, j.Labels, pod.NodeName, pod.Tolerations)
	case *j.Spec.BackoffLimit != 0 || *j.Spec.ActiveDeadlineSeconds != 300 || *j.Spec.TTLSecondsAfterFinished != 3600 || pod.RestartPolicy != corev1.RestartPolicyNever:
		t.Errorf("retries %d, deadline %d, ttl %d, restart %s", *j.Spec.BackoffLimit, *j.Spec.ActiveDeadlineSeconds, *j.Spec.TTLSecondsAfterFinished, pod.RestartPolicy)
	case len(j.OwnerReferences) != 1 || *j.OwnerReferences[0].Controller || j.OwnerReferences[0].UID != "u":
		t.Errorf("owners %+v: want the cluster, not as controller", j.OwnerReferences)
	case *pod.AutomountServiceAccountToken || *pod.Containers[0].SecurityContext.AllowPrivilegeEscalation:
		t.Error("the pod gets a token or may escalate")
	case j.Spec.Template.Labels[LabelNode] != "worker-3" || pod.Containers[0].Env[0].Value != "worker-3":
		t.Errorf("the worker is not named: %v %v", j.Spec.Template.Labels, pod.Containers[0].Env)
	}
}

func TestOutcome(t *testing.T) {
	cond := func(typ batchv1.JobConditionType, reason, msg string) *batchv1.Job {
		return &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg}}}}
	}
	ended := func(code int32, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "check",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}}}
	}
	for _, c := range []struct {
		name      string
		job       *batchv1.Job
		pod       *corev1.Pod
		ended, ok bool
		wantOut   string
	}{
		{"running", &batchv1.Job{}, nil, false, false, ""},
		{"passed", cond(batchv1.JobComplete, "", ""), ended(0, "fine"), true, true, "fine"},
		{"failed with words", cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"), ended(3, "xid 79"), true, false, "xid 79"},
		{"failed silently", cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, ""), ended(3, ""), true, false, "exit 3"},
		{"no pod left", cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"), nil, true, false, "Job has reached the specified backoff limit"},
		{"past its deadline", cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"), ended(137, ""), true, false, "did not end within its timeout"},
	} {
		e, ok, out := Outcome(c.job, c.pod)
		if e != c.ended || ok != c.ok || out != c.wantOut {
			t.Errorf("%s: ended %v passed %v output %q; want %v %v %q", c.name, e, ok, out, c.ended, c.ok, c.wantOut)
		}
	}
}

func TestNotStartedIsAPodThatCannotStartOnly(t *testing.T) {
	waiting := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "check",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{waiting("ImagePullBackOff", `Back-off pulling image "dcgm:nope"`), `its pod cannot start: ImagePullBackOff: Back-off pulling image "dcgm:nope"`},
		{waiting("InvalidImageName", ""), "its pod cannot start: InvalidImageName"},
		{waiting("ErrImagePull", "a registry hiccup"), ""}, // the kubelet tries again
		{waiting("ContainerCreating", ""), ""},
		{&corev1.Pod{}, ""},
		{nil, ""},
	} {
		got, ok := NotStarted(tc.pod)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("NotStarted = %q, %v; want %q", got, ok, tc.want)
		}
	}
}
