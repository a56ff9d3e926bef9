package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

var _ = Describe("events of a SlurmCluster", func() {
	It("records each condition's change as its own event, never folded with another condition's", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc := applySample(ctx, ns, "events")
		// No kubelet runs the pods: the controller, workers and login are all NotReady, the
		// reason the events library would fold into one series if the events did not differ
		// by more than their note.
		byAction := map[string]eventsv1.Event{}
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			clear(byAction)
			for _, e := range list.Items {
				if e.Regarding.UID != sc.UID {
					continue
				}
				g.Expect(byAction).NotTo(HaveKey(e.Action), "two events for %s: %s / %s", e.Action, e.Note, byAction[e.Action].Note)
				byAction[e.Action] = e
			}
			for _, c := range []string{slurmv1alpha1.ConditionControllerAvailable, slurmv1alpha1.ConditionWorkersAvailable, slurmv1alpha1.ConditionLoginAvailable} {
				g.Expect(byAction).To(HaveKey(c))
			}
		}).WithTimeout(timeout).Should(Succeed())
		for action, e := range byAction {
			Expect(e.Note).To(HavePrefix(action+" is "), "the event of %s speaks of another condition", action)
			Expect(e.Series).To(BeNil(), "%s: %s was folded into a series", action, e.Note)
			Expect(e.ReportingController).NotTo(BeEmpty())
		}
		Expect(byAction[slurmv1alpha1.ConditionWorkersAvailable].Reason).To(BeElementOf(slurmv1alpha1.ReasonNotReady, slurmv1alpha1.ReasonNotCreated))
	})
})
