package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

var _ = Describe("the images' Slurm release", func() {
	It("refuses a downgrade, a jump over more than three releases and a controller older than its workers, rolling nothing; an upgrade within the window rolls", func(ctx SpecContext) {
		ns, _ := minimalCluster(ctx, "rel", 1, nil)
		image := func(sts, container string) string { return containerImage(ctx, ns, sts, container) }
		Eventually(func() string { return image("rel-controller", "slurmctld") }).WithTimeout(timeout).Should(HaveSuffix(":24.11"))
		Eventually(func() string { return image("rel-worker", "slurmd") }).WithTimeout(timeout).Should(HaveSuffix(":24.11"))
		setRelease := func(controller, worker, login string) {
			updateSpec(ctx, ns, "rel", func(sc *slurmv1alpha1.SlurmCluster) {
				sc.Spec.Images.Controller = "slurm-k8s/slurmctld:" + controller
				sc.Spec.Images.Worker = "slurm-k8s/slurmd:" + worker
				sc.Spec.Images.Login = "slurm-k8s/login:" + login
			})
		}
		unchanged := func() {
			GinkgoHelper()
			Consistently(func() string {
				return image("rel-controller", "slurmctld") + " " + image("rel-worker", "slurmd")
			}).WithTimeout(2 * time.Second).Should(Equal("slurm-k8s/slurmctld:24.11 slurm-k8s/slurmd:24.11"))
		}

		setRelease("23.11", "23.11", "23.11")
		eventuallyCondition(ctx, ns, "rel", "Degraded", slurmv1alpha1.ReasonSlurmReleaseRefused,
			"spec.images.controller (slurm-k8s/slurmctld:23.11, running 24.11): cannot downgrade Slurm 24.11 to 23.11")
		unchanged()

		setRelease("26.11", "26.11", "26.11")
		eventuallyCondition(ctx, ns, "rel", "Degraded", slurmv1alpha1.ReasonSlurmReleaseRefused,
			"spec.images.worker (slurm-k8s/slurmd:26.11, running 24.11): cannot upgrade Slurm 24.11 to 26.11 in one step: that is 4 releases")
		unchanged()

		setRelease("25.05", "26.05", "25.05")
		eventuallyCondition(ctx, ns, "rel", "Degraded", slurmv1alpha1.ReasonSlurmReleaseRefused,
			"spec.images.controller is Slurm 25.05, older than spec.images.worker's 26.05")
		unchanged()

		// Three releases on, as Slurm allows: rolled, slurmctld first, the workers and login
		// nodes once every slurmctld pod runs the new release and is ready.
		setRelease("26.05", "26.05", "26.05")
		Eventually(func() string { return image("rel-controller", "slurmctld") }).WithTimeout(timeout).Should(Equal("slurm-k8s/slurmctld:26.05"))
		eventuallyCondition(ctx, ns, "rel", slurmv1alpha1.ConditionSlurmUpgrading, slurmv1alpha1.ReasonWaitingForController,
			"waiting for every controller pod to run slurm-k8s/slurmctld:26.05 and be ready: spec.images.worker stays slurm-k8s/slurmd:24.11, spec.images.login stays slurm-k8s/login:24.11")
		Consistently(func() string { return image("rel-worker", "slurmd") }).WithTimeout(2 * time.Second).Should(Equal("slurm-k8s/slurmd:24.11"))
		settle(ctx, ns, "rel-controller")
		Eventually(func() string { return image("rel-worker", "slurmd") + " " + image("rel-login", "sshd") }).
			WithTimeout(timeout).Should(Equal("slurm-k8s/slurmd:26.05 slurm-k8s/login:26.05"))
		eventuallyCondition(ctx, ns, "rel", slurmv1alpha1.ConditionSlurmUpgrading, slurmv1alpha1.ReasonDone, "no change of Slurm release waits")
		Eventually(func(g Gomega) string {
			sc := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "rel"), sc)).To(Succeed())
			var reasons []string
			for _, c := range sc.Status.Conditions {
				reasons = append(reasons, c.Reason)
			}
			return strings.Join(reasons, " ")
		}).WithTimeout(timeout).ShouldNot(ContainSubstring(slurmv1alpha1.ReasonSlurmReleaseRefused))
	})

	It("with accounting, upgrades slurmdbd first, then slurmctld, then the workers", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "acc")
		image := func(sts, container string) string { return containerImage(ctx, ns, sts, container) }
		all := func() string {
			return image("acc-accounting", "slurmdbd") + " " + image("acc-controller", "slurmctld") + " " + image("acc-worker", "slurmd")
		}
		Eventually(all).WithTimeout(timeout).Should(Equal("slurm-k8s/slurmdbd:24.11 slurm-k8s/slurmctld:24.11 slurm-k8s/slurmd:24.11"))
		updateSpec(ctx, ns, "acc", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.Images.Accounting = "slurm-k8s/slurmdbd:25.05"
			sc.Spec.Images.Controller = "slurm-k8s/slurmctld:25.05"
			sc.Spec.Images.Worker = "slurm-k8s/slurmd:25.05"
			sc.Spec.Images.Login = "slurm-k8s/login:25.05"
		})
		Eventually(all).WithTimeout(timeout).Should(Equal("slurm-k8s/slurmdbd:25.05 slurm-k8s/slurmctld:24.11 slurm-k8s/slurmd:24.11"))
		eventuallyCondition(ctx, ns, "acc", slurmv1alpha1.ConditionSlurmUpgrading, slurmv1alpha1.ReasonWaitingForAccounting,
			"waiting for every accounting pod to run slurm-k8s/slurmdbd:25.05 and be ready: spec.images.controller stays slurm-k8s/slurmctld:24.11, spec.images.worker stays")
		Consistently(all).WithTimeout(2 * time.Second).Should(Equal("slurm-k8s/slurmdbd:25.05 slurm-k8s/slurmctld:24.11 slurm-k8s/slurmd:24.11"))
		settle(ctx, ns, "acc-accounting")
		Eventually(all).WithTimeout(timeout).Should(Equal("slurm-k8s/slurmdbd:25.05 slurm-k8s/slurmctld:25.05 slurm-k8s/slurmd:24.11"))
		eventuallyCondition(ctx, ns, "acc", slurmv1alpha1.ConditionSlurmUpgrading, slurmv1alpha1.ReasonWaitingForController, "spec.images.worker stays slurm-k8s/slurmd:24.11")
		settle(ctx, ns, "acc-controller")
		Eventually(all).WithTimeout(timeout).Should(Equal("slurm-k8s/slurmdbd:25.05 slurm-k8s/slurmctld:25.05 slurm-k8s/slurmd:25.05"))
	})
})

// containerImage is the image of a container of a StatefulSet's template ("" while it is missing).
func containerImage(ctx SpecContext, ns, sts, container string) string {
	s := &appsv1.StatefulSet{}
	if err := k8sClient.Get(ctx, key(ns, sts), s); err != nil {
		return ""
	}
	for _, c := range s.Spec.Template.Spec.Containers {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

// settle writes a StatefulSet's status as its controller would once every pod runs the current
// template and is ready (the test's API server runs no StatefulSet controller).
func settle(ctx SpecContext, ns, name string) {
	GinkgoHelper()
	Eventually(func() error {
		s := &appsv1.StatefulSet{}
		if err := k8sClient.Get(ctx, key(ns, name), s); err != nil {
			return err
		}
		n := *s.Spec.Replicas
		s.Status.ObservedGeneration = s.Generation
		s.Status.Replicas, s.Status.UpdatedReplicas, s.Status.ReadyReplicas, s.Status.AvailableReplicas, s.Status.CurrentReplicas = n, n, n, n, n
		return k8sClient.Status().Update(ctx, s)
	}).WithTimeout(timeout).Should(Succeed())
}
