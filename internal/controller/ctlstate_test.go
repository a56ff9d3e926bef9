package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

var _ = Describe("a slurmctld that cannot read its state", func() {
	It("is named in ControllerAvailable, Available and Degraded with slurmctld's words and what to do, until it runs again", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc := applySample(ctx, ns, "st")
		// Play the kubelet: slurmctld stopped on a state file cut short and waits to restart,
		// its last log lines kept as the termination message.
		labels := base.Labels(sc, slurmv1alpha1.ComponentController)
		labels[base.LabelPodIndex] = "0"
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "st-controller-0", Namespace: ns, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "slurmctld", Image: "c"}}},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		line := "slurmctld: fatal: Incomplete job state save file, start with '-i' to ignore this. Warning: using -i will lose the data that can't be recovered."
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "slurmctld", Image: "c", ImageID: "c", RestartCount: 3,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "slurmctld: Recovered state of 1 nodes\n" + line + "\n"}},
		}}
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())

		for _, cond := range []string{slurmv1alpha1.ConditionControllerAvailable, slurmv1alpha1.ConditionAvailable, slurmv1alpha1.ConditionDegraded} {
			eventuallyCondition(ctx, ns, "st", cond, slurmv1alpha1.ReasonControllerStateUnreadable, "st-controller-0: "+line)
			eventuallyCondition(ctx, ns, "st", cond, slurmv1alpha1.ReasonControllerStateUnreadable, "restore StateSaveLocation")
		}

		// Restored and running again: the condition says what it says of any controller.
		p = get(ctx, &corev1.Pod{}, ns, "st-controller-0")
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			sc := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "st"), sc)).To(Succeed())
			for _, cond := range []string{slurmv1alpha1.ConditionControllerAvailable, slurmv1alpha1.ConditionAvailable, slurmv1alpha1.ConditionDegraded} {
				c := meta.FindStatusCondition(sc.Status.Conditions, cond)
				g.Expect(c).NotTo(BeNil(), cond)
				g.Expect(c.Reason).NotTo(Equal(slurmv1alpha1.ReasonControllerStateUnreadable), cond)
			}
		}).WithTimeout(timeout).Should(Succeed())
	})
})
