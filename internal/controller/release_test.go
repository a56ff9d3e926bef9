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
		image := func(sts, container string) string {
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

		// Three releases on, as Slurm allows: rolled.
		setRelease("26.05", "26.05", "26.05")
		Eventually(func() string { return image("rel-controller", "slurmctld") + " " + image("rel-worker", "slurmd") }).
			WithTimeout(timeout).Should(Equal("slurm-k8s/slurmctld:26.05 slurm-k8s/slurmd:26.05"))
		Eventually(func() string {
			sc := &slurmv1alpha1.SlurmCluster{}
			Expect(k8sClient.Get(ctx, key(ns, "rel"), sc)).To(Succeed())
			var reasons []string
			for _, c := range sc.Status.Conditions {
				reasons = append(reasons, c.Reason)
			}
			return strings.Join(reasons, " ")
		}).WithTimeout(timeout).ShouldNot(ContainSubstring(slurmv1alpha1.ReasonSlurmReleaseRefused))
	})
})
