package controller_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// The API server here runs no Job controller: completeJob plays it.
func completeJob(ctx SpecContext, ns, name string) {
	Eventually(func() error {
		j := &batchv1.Job{}
		if err := k8sClient.Get(ctx, key(ns, name), j); err != nil {
			return err
		}
		now := metav1.Now()
		j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		return k8sClient.Status().Update(ctx, j)
	}).WithTimeout(timeout).Should(Succeed())
}

func publishReplicas(ctx SpecContext, ns, name string, n int32) {
	Eventually(func() error {
		s := &appsv1.StatefulSet{}
		if err := k8sClient.Get(ctx, key(ns, name), s); err != nil {
			return err
		}
		s.Status.Replicas, s.Status.ObservedGeneration = n, s.Generation
		return k8sClient.Status().Update(ctx, s)
	}).WithTimeout(timeout).Should(Succeed())
}

var _ = Describe("an overwrite of a populated jail", func() {
	It("waits until no worker or login pod runs in the jail", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		idle := &adminSlurm{}
		for i := 0; i < 8; i++ {
			idle.nodes = append(idle.nodes, slurm.Node{Name: fmt.Sprintf("worker-%d", i), State: []string{"IDLE"}})
		}
		slurmClients.Store(ns, idle)
		DeferCleanup(func() { slurmClients.Delete(ns) })
		sc := applySample(ctx, ns, "rejail")
		first := sc.PopulateJailJobName()
		completeJob(ctx, ns, first)
		eventuallyCondition(ctx, ns, "rejail", "JailPopulated", "Populated", "")
		publishReplicas(ctx, ns, "rejail-worker", 8)
		publishReplicas(ctx, ns, "rejail-login", 2)

		updateSpec(ctx, ns, "rejail", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.PopulateJail.Overwrite = true })
		Expect(k8sClient.Get(ctx, key(ns, "rejail"), sc)).To(Succeed())
		second := sc.PopulateJailJobName()
		Expect(second).NotTo(Equal(first))
		eventuallyCondition(ctx, ns, "rejail", "JailPopulated", "OverwriteWaiting", "8 worker and 2 login pods")
		Consistently(func() error {
			return k8sClient.Get(ctx, key(ns, second), &batchv1.Job{})
		}).WithTimeout(3*time.Second).Should(HaveOccurred(), "the overwrite Job started under running pods")
		// The earlier Job (the record of the first population) is kept meanwhile.
		Expect(k8sClient.Get(ctx, key(ns, first), &batchv1.Job{})).To(Succeed())

		// The admin scales both to zero (the idle workers are drained and removed); once their
		// pods are gone, the overwrite runs.
		updateSpec(ctx, ns, "rejail", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.Size, sc.Spec.SlurmNodes.Login.Size = 0, 0
		})
		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "rejail-worker").Spec.Replicas
		}).WithTimeout(timeout).Should(BeZero())
		publishReplicas(ctx, ns, "rejail-worker", 0)
		publishReplicas(ctx, ns, "rejail-login", 0)
		Eventually(func() error {
			return k8sClient.Get(ctx, key(ns, second), &batchv1.Job{})
		}).WithTimeout(timeout).Should(Succeed())
		eventuallyCondition(ctx, ns, "rejail", "JailPopulated", "Populating", "")
	})
})
