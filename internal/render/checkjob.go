package render

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/checkjob"
)

// CheckJobParams is one run of an active check that runs as a Kubernetes Job.
type CheckJobParams = checkjob.Params

// CheckJobHolderLabel names, on a check's Job and pod, the Slurm job that holds the worker.
const CheckJobHolderLabel = checkjob.LabelHolder

// CheckJob is the Kubernetes Job of one run of an active check (runAs KubernetesJob).
func CheckJob(sc *slurmv1alpha1.SlurmCluster, p CheckJobParams) *batchv1.Job {
	return checkjob.Job(sc, p)
}

// CheckJobOutcome is how a check's Job ended: ended, passed, and the check's output.
func CheckJobOutcome(job *batchv1.Job, pod *corev1.Pod) (ended, passed bool, output string) {
	return checkjob.Outcome(job, pod)
}

// CheckJobNotStarted says why a check's pod cannot start (its image cannot be pulled), if so.
func CheckJobNotStarted(pod *corev1.Pod) (string, bool) {
	return checkjob.NotStarted(pod)
}
