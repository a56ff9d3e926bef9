package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

var _ = Describe("events of a SlurmCluster", func() {
	It("records each condition's change as its own event, and nothing for parts still starting", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc := applySample(ctx, ns, "events")
		events := func(g Gomega) map[string][]eventsv1.Event {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			by := map[string][]eventsv1.Event{}
			for _, e := range list.Items {
				if e.Regarding.UID == sc.UID {
					by[e.Action] = append(by[e.Action], e)
				}
			}
			return by
		}
		// No kubelet runs the pods: every part is created and not ready, which is not news.
		eventuallyCondition(ctx, ns, "events", slurmv1alpha1.ConditionWorkersAvailable, slurmv1alpha1.ReasonNotReady, "")
		Consistently(func(g Gomega) {
			for action, es := range events(g) {
				for _, e := range es {
					g.Expect(e.Reason).NotTo(BeElementOf(slurmv1alpha1.ReasonNotReady, slurmv1alpha1.ReasonNotCreated), "%s: %s", action, e.Note)
				}
			}
		}).WithTimeout(2 * timeout / 10).Should(Succeed())

		// The controller, workers and login turn ready together: three conditions change with
		// the same reason (AllReady), which the events library would fold into one series if
		// the events did not differ by more than their note.
		for _, c := range []slurmv1alpha1.Component{slurmv1alpha1.ComponentController, slurmv1alpha1.ComponentWorker, slurmv1alpha1.ComponentLogin} {
			sts := get(ctx, &appsv1.StatefulSet{}, ns, sc.ComponentName(c))
			n := *sts.Spec.Replicas
			sts.Status.ObservedGeneration, sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas, sts.Status.AvailableReplicas = sts.Generation, n, n, n, n
			Expect(k8sClient.Status().Update(ctx, sts)).To(Succeed())
		}
		var by map[string][]eventsv1.Event
		Eventually(func(g Gomega) {
			by = events(g)
			for _, c := range []string{slurmv1alpha1.ConditionControllerAvailable, slurmv1alpha1.ConditionWorkersAvailable, slurmv1alpha1.ConditionLoginAvailable} {
				g.Expect(by).To(HaveKey(c))
			}
		}).WithTimeout(timeout).Should(Succeed())
		for _, c := range []string{slurmv1alpha1.ConditionControllerAvailable, slurmv1alpha1.ConditionWorkersAvailable, slurmv1alpha1.ConditionLoginAvailable} {
			Expect(by[c]).To(HaveLen(1), "%s", c)
			e := by[c][0]
			Expect(e.Reason).To(Equal(slurmv1alpha1.ReasonAllReady))
			Expect(e.Type).To(Equal("Normal"))
			Expect(e.Note).To(HavePrefix(c+" is True"), "the event of %s speaks of another condition", c)
			Expect(e.Series).To(BeNil(), "%s: %s was folded into a series", c, e.Note)
		}
	})
})
