package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

var _ = Describe("scheduled backups", func() {
	It("are a CronJob beside the first controller pod, follow the spec, refuse a schedule cron cannot read and go when turned off", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc := applySample(ctx, ns, "bk")
		updateSpec(ctx, ns, "bk", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.VolumeSources = append(sc.Spec.VolumeSources, slurmv1alpha1.VolumeSource{
				Name: "backups", PersistentVolumeClaim: &slurmv1alpha1.ClaimSource{ClaimName: "slurm-backups"}})
			sc.Spec.Backups = &slurmv1alpha1.Backups{Schedule: "0 3 * * *", TimeZone: "Europe/Berlin", VolumeSourceName: "backups"}
		})
		Expect(k8sClient.Get(ctx, key(ns, "bk"), sc)).To(Succeed())
		cj := get(ctx, &batchv1.CronJob{}, ns, "bk-backup")
		Expect(ownedBy(cj, sc)).To(BeTrue())
		Expect(cj.Spec.Schedule).To(Equal("0 3 * * *"))
		Expect(cj.Spec.TimeZone).To(HaveValue(Equal("Europe/Berlin")))
		Expect(cj.Spec.ConcurrencyPolicy).To(Equal(batchv1.ForbidConcurrent))
		pod := cj.Spec.JobTemplate.Spec.Template.Spec
		Expect(pod.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(ConsistOf(
			HaveField("LabelSelector.MatchLabels", HaveKeyWithValue("statefulset.kubernetes.io/pod-name", "bk-controller-0"))))
		Expect(pod.Containers[0].Env).To(ContainElements(
			corev1.EnvVar{Name: "NAME", Value: "scheduled"}, corev1.EnvVar{Name: "KEEP", Value: "7"}))
		Expect(pod.Volumes).To(ContainElement(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "slurm-backups")))

		// When the CronJob started a backup and when one completed: the operator's gauges.
		series := map[string]string{"namespace": ns, "slurmcluster": "bk"}
		Eventually(func() bool {
			v, ok := metricValue("slurm_operator_backup_last_success_timestamp_seconds", series)
			return ok && v == 0
		}).WithTimeout(timeout).Should(BeTrue(), "no backup yet: 0")
		started, finished := metav1.NewTime(time.Unix(1_800_000_000, 0)), metav1.NewTime(time.Unix(1_800_000_120, 0))
		Eventually(func() error {
			cj := get(ctx, &batchv1.CronJob{}, ns, "bk-backup")
			cj.Status.LastScheduleTime, cj.Status.LastSuccessfulTime = &started, &finished
			return k8sClient.Status().Update(ctx, cj)
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func() []float64 {
			a, _ := metricValue("slurm_operator_backup_last_schedule_timestamp_seconds", series)
			b, _ := metricValue("slurm_operator_backup_last_success_timestamp_seconds", series)
			return []float64{a, b}
		}).WithTimeout(timeout).Should(Equal([]float64{1_800_000_000, 1_800_000_120}))

		// keep and suspend reach the CronJob.
		updateSpec(ctx, ns, "bk", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.Backups.Keep = 30
			sc.Spec.Backups.Suspend = true
		})
		Eventually(func(g Gomega) {
			cj := get(ctx, &batchv1.CronJob{}, ns, "bk-backup")
			g.Expect(cj.Spec.Suspend).To(HaveValue(BeTrue()))
			g.Expect(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "KEEP", Value: "30"}))
		}).WithTimeout(timeout).Should(Succeed())

		// A schedule admission lets through but cron cannot read (a range that ends before it
		// starts): the status names the field, and the CronJob keeps its last schedule.
		updateSpec(ctx, ns, "bk", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.Backups.Schedule = "0 5-3 * * *" })
		eventuallyCondition(ctx, ns, "bk", slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ReasonRenderFailed, `spec.backups.schedule "0 5-3 * * *"`)
		Expect(get(ctx, &batchv1.CronJob{}, ns, "bk-backup").Spec.Schedule).To(Equal("0 3 * * *"))

		updateSpec(ctx, ns, "bk", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.Backups = nil })
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, "bk-backup"), &batchv1.CronJob{}))
		}).WithTimeout(timeout).Should(BeTrue())
		Eventually(func() bool {
			_, ok := metricValue("slurm_operator_backup_last_success_timestamp_seconds", series)
			return ok
		}).WithTimeout(timeout).Should(BeFalse(), "the series goes with spec.backups")
	})
})
