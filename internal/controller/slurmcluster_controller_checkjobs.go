package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/activecheck"
	"github.com/slurm-k8s/slurm-operator/internal/render"
)

// checkPods runs the active checks that run as Kubernetes Jobs (runAs KubernetesJob) of one
// cluster: the Job of a run is created once its Slurm holder job runs, and read when it ends.
type checkPods struct {
	r  *SlurmClusterReconciler
	sc *slurmv1alpha1.SlurmCluster
}

// PodCheck implements activecheck.Pods.
func (p checkPods) PodCheck(ctx context.Context, c activecheck.Check, node string, holder int64, start bool) (activecheck.PodOutcome, error) {
	name := p.sc.ActiveCheckJobName(holder)
	job := &batchv1.Job{}
	found, err := p.r.getOptional(ctx, types.NamespacedName{Namespace: p.sc.Namespace, Name: name}, job)
	switch {
	case err != nil:
		return activecheck.PodOutcome{}, err
	case !found && !start:
		return activecheck.PodOutcome{}, nil
	case !found:
		err := p.create(ctx, c, node, holder)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			// Refused for good (a quota, a policy, a field the API server will not take): no
			// word on the worker, and no waiting for the holder's time to run out.
			msg := err.Error()
			var status apierrors.APIStatus
			if errors.As(err, &status) {
				msg = status.Status().Message // the API server's words, without this function's
			}
			return activecheck.PodOutcome{Ended: true, NotRun: true, Output: "its Job was refused: " + msg}, nil
		}
		return activecheck.PodOutcome{}, err
	}
	// The pod's termination message is the check's output, and its waiting reason says whether
	// it can start at all; the cache keeps pods slim, so the pod is read from the API server.
	pod, err := p.pod(ctx, holder)
	if err != nil {
		return activecheck.PodOutcome{}, fmt.Errorf("read the pod of check Job %s: %w", name, err)
	}
	if jobFinished(job) {
		ended, passed, out := render.CheckJobOutcome(job, pod)
		return activecheck.PodOutcome{Ended: ended, Passed: passed, Output: out}, nil
	}
	if why, stuck := render.CheckJobNotStarted(pod); stuck {
		// No word on the worker; the Job goes, so that its pod stops pulling on the node.
		if err := p.r.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return activecheck.PodOutcome{}, fmt.Errorf("delete the check Job %s, whose pod cannot start: %w", name, err)
		}
		return activecheck.PodOutcome{Ended: true, NotRun: true, Output: why}, nil
	}
	return activecheck.PodOutcome{}, nil
}

// pod is the newest pod of the check Job of the holder, nil when there is none yet.
func (p checkPods) pod(ctx context.Context, holder int64) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := p.r.APIReader.List(ctx, pods, client.InNamespace(p.sc.Namespace),
		client.MatchingLabels{render.CheckJobHolderLabel: strconv.FormatInt(holder, 10)}); err != nil {
		return nil, err
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		if pod == nil || pods.Items[i].CreationTimestamp.After(pod.CreationTimestamp.Time) {
			pod = &pods.Items[i]
		}
	}
	return pod, nil
}

// create makes the check's Job on the Kubernetes node of the worker's pod, past its taints.
func (p checkPods) create(ctx context.Context, c activecheck.Check, node string, holder int64) error {
	podName := workerPodName(p.sc, node)
	if podName == "" {
		return fmt.Errorf("%s is not a worker of %s", node, p.sc.Name)
	}
	worker := &corev1.Pod{}
	if err := p.r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.sc.Namespace, Name: podName}, worker); err != nil {
		return fmt.Errorf("find the pod of %s: %w", node, err)
	}
	if worker.Spec.NodeName == "" {
		return fmt.Errorf("the pod of %s has no Kubernetes node yet", node)
	}
	job := render.CheckJob(p.sc, render.CheckJobParams{
		Check: c.Name, Script: c.PodScript(), Image: c.Image, Timeout: c.Timeout,
		SlurmNode: node, Holder: holder, KubeNode: worker.Spec.NodeName, Tolerations: worker.Spec.Tolerations,
	})
	if err := p.r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the check's Job %s: %w", job.Name, err)
	}
	return nil
}
