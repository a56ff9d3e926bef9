// Package checkjob renders the Kubernetes Job of an active check that runs as one
// (runAs KubernetesJob): one pod, pinned to the Kubernetes node of the worker it checks, that
// runs the check's script once and says how it went in its exit status and termination message.
package checkjob

import (
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// Keep is how long a finished check Job stays (its pod's termination message is the result):
// longer than Slurm keeps its holder job (MinJobAge, 300 s), so an operator restarted meanwhile
// still finds both.
const Keep = time.Hour

// Label names the check on its Job and pod; LabelHolder the Slurm job that holds the worker.
const (
	LabelCheck  = "slurm.hpc.dev/active-check"
	LabelHolder = "slurm.hpc.dev/active-check-holder"
	LabelNode   = "slurm.hpc.dev/slurm-node"
)

// Params is one run of a check.
type Params struct {
	Check, Script, Image string
	Timeout              time.Duration
	// SlurmNode is the worker checked; Holder the Slurm job that holds it meanwhile.
	SlurmNode string
	Holder    int64
	// KubeNode is the Kubernetes node of the worker's pod, and Tolerations its tolerations:
	// the check's pod runs there, past the same taints.
	KubeNode    string
	Tolerations []corev1.Toleration
}

// Job renders the check's Job. Its owner is the SlurmCluster, but not as controller: the
// cluster's render does not hold it, so pruning leaves it to its time to live.
func Job(sc *slurmv1alpha1.SlurmCluster, p Params) *batchv1.Job {
	labels := func() map[string]string {
		l := base.Labels(sc, slurmv1alpha1.ComponentActiveCheck)
		l[LabelCheck], l[LabelHolder], l[LabelNode] = p.Check, strconv.FormatInt(p.Holder, 10), p.SlurmNode
		return l
	}
	pod := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		NodeName:      p.KubeNode,
		Tolerations:   p.Tolerations,
		Containers: []corev1.Container{base.Container(sc, corev1.Container{
			Name:    "check",
			Image:   p.Image,
			Command: []string{"/bin/bash", "-c", p.Script},
			Env: []corev1.EnvVar{
				{Name: "SLURMD_NODENAME", Value: p.SlurmNode},
				{Name: "SLURM_JOB_ID", Value: strconv.FormatInt(p.Holder, 10)},
			},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("32Mi"),
			}},
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		})},
	}
	base.PullSecrets(sc, &pod)
	base.Harden(&pod)
	meta := base.ObjectMeta(sc, sc.ActiveCheckJobName(p.Holder), slurmv1alpha1.ComponentActiveCheck)
	meta.Labels = labels()
	meta.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: slurmv1alpha1.GroupVersion.String(), Kind: "SlurmCluster", Name: sc.Name, UID: sc.UID,
		BlockOwnerDeletion: ptr.To(false), Controller: ptr.To(false),
	}}
	return &batchv1.Job{
		TypeMeta:   base.TypeMeta("batch/v1", "Job"),
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			ActiveDeadlineSeconds:   ptr.To(int64(p.Timeout / time.Second)),
			TTLSecondsAfterFinished: ptr.To(int32(Keep / time.Second)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec:       pod,
			},
		},
	}
}

// Outcome reads how a check's Job ended from the Job and its pod (nil when none was made):
// ended, passed, and the check's output (the termination message), or why the Job failed
// when the check said nothing.
func Outcome(job *batchv1.Job, pod *corev1.Pod) (ended, passed bool, output string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true, message(pod, "exit 0")
		case batchv1.JobFailed:
			why := c.Message
			if c.Reason == batchv1.JobReasonDeadlineExceeded {
				why = "did not end within its timeout"
			}
			if why == "" {
				why = c.Reason
			}
			if c.Reason != batchv1.JobReasonDeadlineExceeded {
				why = message(pod, why)
			}
			return true, false, why
		}
	}
	return false, false, ""
}

// message is the check container's termination message, or its exit code, or otherwise.
func message(pod *corev1.Pod, otherwise string) string {
	if pod == nil {
		return otherwise
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == "check" && t != nil {
			if t.Message != "" {
				return t.Message
			}
			return "exit " + strconv.Itoa(int(t.ExitCode))
		}
	}
	return otherwise
}

// NotStarted says why the check's pod cannot start, if it cannot: the check container's
// waiting reason and message. Such a run says nothing of the worker. A first ErrImagePull is
// not taken: the kubelet pulls again, and backs off (ImagePullBackOff) if that fails too.
func NotStarted(pod *corev1.Pod) (string, bool) {
	if pod == nil {
		return "", false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; cs.Name == "check" && w != nil && slurmfacts.ContainerCannotStart[w.Reason] && w.Reason != "ErrImagePull" {
			why := "its pod cannot start: " + w.Reason
			if w.Message != "" {
				why += ": " + w.Message
			}
			return why, true
		}
	}
	return "", false
}
