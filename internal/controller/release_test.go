package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

var _ = Describe("the images' Slurm release", func() {
	It("refuses a downgrade, a jump over more than three releases and a controller older than its workers, rolling nothing; an upgrade within the window rolls", func(ctx SpecContext) {
		ns, _ := minimalCluster(ctx, "rel", 1, nil)
		image := func(sts, container string) string { return containerImage(ctx, ns, sts, container) }
		Eventually(func() string { return image("rel-controller", "slurmctld") }).WithTimeout(timeout).Should(HaveSuffix(":24.11"))
		Eventually(func() string { return image("rel-worker", "slurmd") }).WithTimeout(timeout).Should(HaveSuffix(":24.11"))
		setRelease := func(controller, worker, login string) {
			updateSpec(ctx, ns, "rel", func(sc *slurmv1alpha1.SlurmCluster) {
				sc.Spec.Upgrades.Backup = &slurmv1alpha1.UpgradeBackup{Skip: true}
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

	It("with accounting, backs up first, then upgrades slurmdbd, then slurmctld, then the workers", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "acc")
		image := func(sts, container string) string { return containerImage(ctx, ns, sts, container) }
		all := func() string {
			return image("acc-accounting", "slurmdbd") + " " + image("acc-controller", "slurmctld") + " " + image("acc-worker", "slurmd")
		}
		before := "slurm-k8s/slurmdbd:24.11 slurm-k8s/slurmctld:24.11 slurm-k8s/slurmd:24.11"
		Eventually(all).WithTimeout(timeout).Should(Equal(before))
		updateSpec(ctx, ns, "acc", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.Images.Accounting = "slurm-k8s/slurmdbd:25.05"
			sc.Spec.Images.Controller = "slurm-k8s/slurmctld:25.05"
			sc.Spec.Images.Worker = "slurm-k8s/slurmd:25.05"
			sc.Spec.Images.Login = "slurm-k8s/login:25.05"
		})

		// No backup configured: nothing rolls, and the status says what to set.
		eventuallyCondition(ctx, ns, "acc", slurmv1alpha1.ConditionSlurmUpgrading, slurmv1alpha1.ReasonBackupNotConfigured,
			"set spec.upgrades.backup.volumeSourceName to a volume of spec.volumeSources, or spec.upgrades.backup.skip: true")
		Consistently(all).WithTimeout(2 * time.Second).Should(Equal(before))

		// A backup volume: the Job is made on the first controller pod's node (its spool is a
		// claim of its own), from the new accounting image; still nothing rolls.
		ctrl0 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "acc-controller-0", Labels: map[string]string{base.LabelManagedBy: base.ManagedBy}},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "slurmctld", Image: "slurm-k8s/slurmctld:24.11"}}}}
		Expect(k8sClient.Create(ctx, ctrl0)).To(Succeed())
		updateSpec(ctx, ns, "acc", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.VolumeSources = append(sc.Spec.VolumeSources, slurmv1alpha1.VolumeSource{Name: "backups",
				PersistentVolumeClaim: &slurmv1alpha1.ClaimSource{ClaimName: "slurm-backups"}})
			sc.Spec.Upgrades.Backup = &slurmv1alpha1.UpgradeBackup{VolumeSourceName: "backups"}
		})
		jobName := "acc-upgrade-backup-" + slurmv1alpha1.ShortHash([]byte("accounting=25.05 controller=25.05"))[:8]
		job := get(ctx, &batchv1.Job{}, ns, jobName)
		pod := job.Spec.Template.Spec
		Expect(pod.NodeName).To(Equal("node-a"))
		Expect(pod.Containers[0].Image).To(Equal("slurm-k8s/slurmdbd:25.05"))
		claims := map[string]string{}
		for _, v := range pod.Volumes {
			switch {
			case v.PersistentVolumeClaim != nil:
				claims[v.Name] = v.PersistentVolumeClaim.ClaimName
			case v.Secret != nil:
				claims[v.Name] = "secret " + v.Secret.SecretName
			}
		}
		Expect(claims).To(Equal(map[string]string{"backup": "slurm-backups", "statesave": "spool-acc-controller-0", "slurmdbd-conf": "secret acc-slurmdbd-conf"}))
		Expect(pod.Containers[0].Env).To(ContainElements(
			corev1.EnvVar{Name: "FROM", Value: "24.11"}, corev1.EnvVar{Name: "TO", Value: "25.05"}, corev1.EnvVar{Name: "CLUSTER", Value: "fpt-hpc"}))
		eventuallyCondition(ctx, ns, "acc", slurmv1alpha1.ConditionSlurmUpgrading, slurmv1alpha1.ReasonWaitingForBackup,
			"the backup Job "+jobName+" writes the accounting database and the controller's state to volume source \"backups\"")
		Consistently(all).WithTimeout(2 * time.Second).Should(Equal(before))

		// A failed backup holds the upgrade; deleted, it is made again.
		failJob(ctx, ns, jobName)
		eventuallyCondition(ctx, ns, "acc", slurmv1alpha1.ConditionSlurmUpgrading, slurmv1alpha1.ReasonBackupFailed,
			"the backup Job "+jobName+" failed (see its pod's log); delete the Job to try again")
		Consistently(all).WithTimeout(2 * time.Second).Should(Equal(before))
		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			notes := map[string]string{}
			for _, e := range list.Items {
				notes[e.Reason] = e.Type + " " + e.Note
			}
			g.Expect(notes).To(HaveKeyWithValue("UpgradeBackup", "Normal backing up before Slurm 24.11 → 25.05: Job "+jobName+
				" writes to volume source \"backups\", folder fpt-hpc/"))
			g.Expect(notes).To(HaveKeyWithValue("UpgradeBackupFailed", HavePrefix("Warning Slurm 24.11 → 25.05 waits: the backup Job "+jobName+" failed")))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(k8sClient.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		Eventually(func() bool {
			j := &batchv1.Job{}
			return k8sClient.Get(ctx, key(ns, jobName), j) == nil && j.UID != job.UID
		}).WithTimeout(timeout).Should(BeTrue())

		// Backed up: the stages run, and the Job stays as the record.
		completeJob(ctx, ns, jobName)
		Eventually(all).WithTimeout(timeout).Should(Equal("slurm-k8s/slurmdbd:25.05 slurm-k8s/slurmctld:24.11 slurm-k8s/slurmd:24.11"))
		eventuallyCondition(ctx, ns, "acc", slurmv1alpha1.ConditionSlurmUpgrading, slurmv1alpha1.ReasonWaitingForAccounting,
			"waiting for every accounting pod to run slurm-k8s/slurmdbd:25.05 and be ready: spec.images.controller stays slurm-k8s/slurmctld:24.11, spec.images.worker stays")
		Consistently(all).WithTimeout(2 * time.Second).Should(Equal("slurm-k8s/slurmdbd:25.05 slurm-k8s/slurmctld:24.11 slurm-k8s/slurmd:24.11"))
		settle(ctx, ns, "acc-accounting")
		Eventually(all).WithTimeout(timeout).Should(Equal("slurm-k8s/slurmdbd:25.05 slurm-k8s/slurmctld:25.05 slurm-k8s/slurmd:24.11"))
		eventuallyCondition(ctx, ns, "acc", slurmv1alpha1.ConditionSlurmUpgrading, slurmv1alpha1.ReasonWaitingForController, "spec.images.worker stays slurm-k8s/slurmd:24.11")
		settle(ctx, ns, "acc-controller")
		Eventually(all).WithTimeout(timeout).Should(Equal("slurm-k8s/slurmdbd:25.05 slurm-k8s/slurmctld:25.05 slurm-k8s/slurmd:25.05"))
		Consistently(func() error { return k8sClient.Get(ctx, key(ns, jobName), &batchv1.Job{}) }).WithTimeout(2 * time.Second).Should(Succeed())
	})
})

// failJob plays the Job controller for a Job that ran out of retries.
func failJob(ctx SpecContext, ns, name string) {
	Eventually(func() error {
		j := &batchv1.Job{}
		if err := k8sClient.Get(ctx, key(ns, name), j); err != nil {
			return err
		}
		now := metav1.Now()
		j.Status.StartTime, j.Status.Failed = &now, 3
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "BackoffLimitExceeded"},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "BackoffLimitExceeded"},
		}
		return k8sClient.Status().Update(ctx, j)
	}).WithTimeout(timeout).Should(Succeed())
}

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
