package controller_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/policy"
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

		By("1.25 MiB of root keys (the ConfigMap limit is 1 MiB) and one more worker, in one edit")
		var keys []slurmv1alpha1.SSHPublicKey
		for i := 0; i < 80; i++ {
			keys = append(keys, slurmv1alpha1.SSHPublicKey("ssh-rsa "+strings.Repeat("A", 16000)+" user"+strings.Repeat("x", i%10)))
		}
		updateSpec(ctx, ns, "big", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Login.SSHRootPublicKeys = keys
			sc.Spec.SlurmNodes.Worker.Size = 9
		})
		Eventually(func(g Gomega) {
			sc := currentStatus(g, ctx, ns, "big")
			c := meta.FindStatusCondition(sc.Status.Conditions, "Degraded")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal("ApplyFailed"))
			g.Expect(c.Message).To(ContainSubstring("ConfigMap big-root-authorized-keys: "))
			g.Expect(c.Message).To(ContainSubstring("1048576"))
			g.Expect(sc.Status.Workers.Desired).To(Equal(int32(9)))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "big-worker").Spec.Replicas).To(Equal(int32(9)))
		Expect(slurmConf(ctx, ns, "big")).To(ContainSubstring("NodeName=worker-[0-8]"))

		By("keys that fit: Degraded clears")
		updateSpec(ctx, ns, "big", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Login.SSHRootPublicKeys = keys[:1]
		})
		Eventually(func(g Gomega) {
			sc := currentStatus(g, ctx, ns, "big")
			// (The sample's exporter has no ServiceMonitor API here: that is said, and only that.)
			c := meta.FindStatusCondition(sc.Status.Conditions, "Degraded")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).NotTo(Equal("ApplyFailed"))
			g.Expect(c.Message).NotTo(ContainSubstring("ConfigMap"))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(get(ctx, &corev1.ConfigMap{}, ns, "big-root-authorized-keys").Data).To(HaveLen(1))
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
