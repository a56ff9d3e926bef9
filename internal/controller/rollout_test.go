package controller_test

import (
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// The API server used here runs no StatefulSet controller and no kubelet, so these helpers play
// them: they create worker pods of a given template revision and publish the StatefulSet's
// update revision.

func workerPod(ctx SpecContext, ns, cluster string, i int, revision string, ready bool) {
	workerPodOn(ctx, ns, cluster, i, revision, ready, "")
}

// workerPodOn is workerPod scheduled to a node (as the scheduler would bind it).
func workerPodOn(ctx SpecContext, ns, cluster string, i int, revision string, ready bool, nodeName string) {
	setPodOn(ctx, ns, cluster, slurmv1alpha1.DefaultNodeSet, i, revision, ready, nodeName)
}

// setPodOn is a worker set's pod <cluster>-<set>-i, with the set's label unless it is the
// default set, scheduled to nodeName when set.
func setPodOn(ctx SpecContext, ns, cluster, set string, i int, revision string, ready bool, nodeName string) {
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Name, sc.Namespace = cluster, ns
	labels := base.Labels(sc, slurmv1alpha1.ComponentWorker)
	if set != slurmv1alpha1.DefaultNodeSet {
		labels[slurmv1alpha1.LabelNodeSet] = set
	}
	labels[appsv1.ControllerRevisionHashLabelKey] = revision
	labels[base.LabelPodIndex] = strconv.Itoa(i)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", cluster, set, i), Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "slurmd", Image: "slurmd"}}},
	}
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	// The operator may label the new pod (busy or not) in between: read it again on a conflict.
	Eventually(func() error {
		if err := k8sClient.Get(ctx, key(ns, p.Name), p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
		return k8sClient.Status().Update(ctx, p)
	}).WithTimeout(timeout).Should(Succeed())
}

func publishRevision(ctx SpecContext, ns, cluster string, replicas int32, current, update string) {
	publishSetRevision(ctx, ns, cluster+"-worker", replicas, current, update)
}

func podGone(ctx SpecContext, ns, name string) func() bool {
	return func() bool { return apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, name), &corev1.Pod{})) }
}

var _ = Describe("updating worker pods", func() {
	It("uses OnDelete and replaces no outdated pod while Slurm cannot be asked", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "roll")
		w := get(ctx, &appsv1.StatefulSet{}, ns, "roll-worker")
		Expect(w.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType))
		workerPod(ctx, ns, "roll", 0, "old", true)
		publishRevision(ctx, ns, "roll", 8, "old", "new")
		eventuallyCondition(ctx, ns, "roll", "WorkersUpdating", "SlurmUnreachable", "")
		Consistently(podGone(ctx, ns, "roll-worker-0")).WithTimeout(3 * time.Second).Should(BeFalse())
	})
})
