package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/policy"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// currentStatus reads the cluster and checks that its status speaks of its current generation.
func currentStatus(g Gomega, ctx SpecContext, ns, name string) *slurmv1alpha1.SlurmCluster {
	sc := &slurmv1alpha1.SlurmCluster{}
	g.Expect(k8sClient.Get(ctx, key(ns, name), sc)).To(Succeed())
	g.Expect(sc.Status.ObservedGeneration).To(Equal(sc.Generation), "observedGeneration")
	return sc
}

var _ = Describe("the status on every path", func() {
	It("names a child the API server refuses, and applies every other child", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "big")
		get(ctx, &appsv1.StatefulSet{}, ns, "big-worker")
		get(ctx, &appsv1.Deployment{}, ns, "big-exporter")

		By("a quota that allows no Deployment, the exporter's deleted, and one more worker")
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-deployments", Namespace: ns},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}}}
		Expect(k8sClient.Create(ctx, quota)).To(Succeed())
		// No quota controller runs here: publish its usage by hand, as it would.
		quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{"count/deployments.apps": resource.MustParse("0")}}
		Expect(k8sClient.Status().Update(ctx, quota)).To(Succeed())
		Expect(k8sClient.Delete(ctx, get(ctx, &appsv1.Deployment{}, ns, "big-exporter"))).To(Succeed())
		updateSpec(ctx, ns, "big", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 9 })

		Eventually(func(g Gomega) {
			sc := currentStatus(g, ctx, ns, "big")
			c := meta.FindStatusCondition(sc.Status.Conditions, "Degraded")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal("ApplyFailed"))
			g.Expect(c.Message).To(ContainSubstring("Deployment big-exporter: "))
			g.Expect(c.Message).To(ContainSubstring("exceeded quota: no-deployments"))
			g.Expect(sc.Status.Workers.Desired).To(Equal(int32(9)))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "big-worker").Spec.Replicas).To(Equal(int32(9)))
		Expect(slurmConf(ctx, ns, "big")).To(ContainSubstring("NodeName=worker-[0-8]"))

		By("the quota lifted: the exporter is back and Degraded no longer names it")
		Expect(k8sClient.Delete(ctx, quota)).To(Succeed())
		get(ctx, &appsv1.Deployment{}, ns, "big-exporter")
		Eventually(func(g Gomega) {
			sc := currentStatus(g, ctx, ns, "big")
			// (The sample's exporter has no ServiceMonitor API here: that is said, and only that.)
			c := meta.FindStatusCondition(sc.Status.Conditions, "Degraded")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).NotTo(Equal("ApplyFailed"))
			g.Expect(c.Message).NotTo(ContainSubstring("Deployment"))
		}).WithTimeout(timeout).Should(Succeed())
	})

	It("leaves a populate Job as it was made when its template would change", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc := applySample(ctx, ns, "job")
		job := get(ctx, &batchv1.Job{}, ns, base.WithDefaults(sc).PopulateJailJobName())
		updateSpec(ctx, ns, "job", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.Images.PullPolicy = string(corev1.PullAlways) })
		Eventually(func(g Gomega) {
			w := &appsv1.StatefulSet{}
			g.Expect(k8sClient.Get(ctx, key(ns, "job-worker"), w)).To(Succeed())
			g.Expect(w.Spec.Template.Spec.Containers[0].ImagePullPolicy).To(Equal(corev1.PullAlways))
			sc := currentStatus(g, ctx, ns, "job")
			c := meta.FindStatusCondition(sc.Status.Conditions, "Degraded")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).NotTo(Equal("ApplyFailed"))
		}).WithTimeout(timeout).Should(Succeed())
		now := get(ctx, &batchv1.Job{}, ns, job.Name)
		Expect(now.UID).To(Equal(job.UID))
		Expect(now.Spec.Template.Spec.Containers[0].ImagePullPolicy).To(Equal(job.Spec.Template.Spec.Containers[0].ImagePullPolicy))
	})

	It("writes the status when a phase fails, and keeps what the children said", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "keyless")
		get(ctx, &appsv1.StatefulSet{}, ns, "keyless-worker")
		Eventually(func(g Gomega) {
			sc := currentStatus(g, ctx, ns, "keyless")
			g.Expect(meta.FindStatusCondition(sc.Status.Conditions, "WorkersAvailable")).NotTo(BeNil())
		}).WithTimeout(timeout).Should(Succeed())

		By("someone empties the JWT key Secret, then the spec changes")
		Eventually(func() error {
			s := &corev1.Secret{}
			if err := k8sClient.Get(ctx, key(ns, "keyless-jwt-key"), s); err != nil {
				return err
			}
			s.Data = map[string][]byte{"something-else": []byte("x")}
			return k8sClient.Update(ctx, s)
		}).WithTimeout(timeout).Should(Succeed())
		updateSpec(ctx, ns, "keyless", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 3 })
		Eventually(func(g Gomega) {
			sc := currentStatus(g, ctx, ns, "keyless")
			c := meta.FindStatusCondition(sc.Status.Conditions, "Degraded")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("ReconcileFailed"))
			g.Expect(c.Message).To(ContainSubstring("ensure keys: jwt key: secret " + ns + "/keyless-jwt-key exists but has no"))
			// Rendered with no key, nothing changed: the StatefulSet keeps its size.
			g.Expect(meta.FindStatusCondition(sc.Status.Conditions, "WorkersAvailable")).NotTo(BeNil())
		}).WithTimeout(timeout).Should(Succeed())
		Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "keyless-worker").Spec.Replicas).To(Equal(int32(8)))
	})
})

var _ = Describe("the installer's policy", func() {
	It("refuses a spec with an image outside the allowed prefixes, naming the field, and keeps what runs", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "pol")
		get(ctx, &appsv1.StatefulSet{}, ns, "pol-worker")
		// This spec's reconciler has a policy; the suite's manager, which has none, waits.
		stopManager()
		DeferCleanup(startManager)
		direct, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		r := &controller.SlurmClusterReconciler{Client: direct, APIReader: direct, Scheme: k8sClient.Scheme(),
			SlurmClient: slurmClientFor, Policy: policy.Policy{ImagePrefixes: []string{"registry.example.com/hpc/"}}}
		updateSpec(ctx, ns, "pol", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 9 })
		_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: key(ns, "pol")})
		Expect(err).NotTo(HaveOccurred())

		sc := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, key(ns, "pol"), sc)).To(Succeed())
		for _, t := range []string{"Available", "Degraded"} {
			c := meta.FindStatusCondition(sc.Status.Conditions, t)
			Expect(c).NotTo(BeNil(), t)
			Expect(c.Reason).To(Equal("PolicyViolation"), t)
			Expect(c.Message).To(ContainSubstring(`spec.images.controller "slurm-k8s/slurmctld:24.11" is not allowed by the operator's policy`), t)
		}
		Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "pol-worker").Spec.Replicas).To(Equal(int32(8)))
	})
})
