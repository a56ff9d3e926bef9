package controller

import (
	"context"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
		return activecheck.PodOutcome{}, p.create(ctx, c, node, holder)
	case jobFinished(job):
		// The pod's termination message is the check's output; the cache keeps pods slim, so
		// it is read from the API server, once per run.
		pods := &corev1.PodList{}
		if err := p.r.APIReader.List(ctx, pods, client.InNamespace(p.sc.Namespace),
			client.MatchingLabels{render.CheckJobHolderLabel: strconv.FormatInt(holder, 10)}); err != nil {
			return activecheck.PodOutcome{}, fmt.Errorf("read the pod of check Job %s: %w", name, err)
		}
		var pod *corev1.Pod
		for i := range pods.Items {
			if pod == nil || pods.Items[i].CreationTimestamp.After(pod.CreationTimestamp.Time) {
				pod = &pods.Items[i]
			}
		}
		ended, passed, out := render.CheckJobOutcome(job, pod)
		return activecheck.PodOutcome{Ended: ended, Passed: passed, Output: out}, nil
	}
	return activecheck.PodOutcome{}, nil
}

// create makes the check's Job on the Kubernetes node of the worker's pod, past its taints.
func (p checkPods) create(ctx context.Context, c activecheck.Check, node string, holder int64) error {
	ord := ordinalOf(node)
	if ord < 0 {
		return fmt.Errorf("%s is not a worker of %s", node, p.sc.Name)
	}
	podName := p.sc.PodName(slurmv1alpha1.ComponentWorker, int32(ord))
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
