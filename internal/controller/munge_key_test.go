package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

var _ = Describe("the munge key Secret of a cluster that already ran", func() {
	It("is never made again when deleted: the condition says so and nothing is re-rendered", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "keyed")
		get(ctx, &appsv1.StatefulSet{}, ns, "keyed-controller")
		secret := get(ctx, &corev1.Secret{}, ns, "keyed-munge-key")
		// With the operator stopped, so no reconcile in flight re-applies the Secret it read.
		stopManager()
		Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
		startManager()

		// A later change must not go out with a new key either.
		updateSpec(ctx, ns, "keyed", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 9 })
		eventuallyCondition(ctx, ns, "keyed", "Available", "MungeKeyMissing", "keyed-munge-key")
		eventuallyCondition(ctx, ns, "keyed", "Degraded", "MungeKeyMissing", "Restore the Secret")
		Consistently(func() bool {
			err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "keyed-munge-key"}, &corev1.Secret{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(3*time.Second).Should(BeTrue(), "a new munge key was made for a cluster that ran with another")
		Expect(slurmConf(ctx, ns, "keyed")).NotTo(ContainSubstring("worker-[0-8]"))

		// Restored from a backup (kubectl get secret -o yaml), the cluster goes on with its key.
		restored := &corev1.Secret{}
		restored.Namespace, restored.Name = ns, secret.Name
		restored.Labels, restored.OwnerReferences, restored.Data = secret.Labels, secret.OwnerReferences, secret.Data
		Expect(k8sClient.Create(ctx, restored)).To(Succeed())
		Eventually(func() string { return slurmConf(ctx, ns, "keyed") }).WithTimeout(timeout).Should(ContainSubstring("worker-[0-8]"))
		Expect(get(ctx, &corev1.Secret{}, ns, secret.Name).Data).To(Equal(secret.Data))
	})

	It("is found and kept when someone strips its labels (the cache holds only labelled Secrets)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "stripped")
		get(ctx, &appsv1.StatefulSet{}, ns, "stripped-controller")
		secret := get(ctx, &corev1.Secret{}, ns, "stripped-munge-key")
		key := secret.Data["munge.key"]
		Eventually(func() error {
			s := &corev1.Secret{}
			if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: secret.Name}, s); err != nil {
				return err
			}
			s.Labels = nil
			return k8sClient.Update(ctx, s)
		}).WithTimeout(timeout).Should(Succeed())
		updateSpec(ctx, ns, "stripped", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 9 })
		Eventually(func() string { return slurmConf(ctx, ns, "stripped") }).WithTimeout(timeout).Should(ContainSubstring("worker-[0-8]"))
		Consistently(func() []byte {
			return get(ctx, &corev1.Secret{}, ns, secret.Name).Data["munge.key"]
		}).WithTimeout(2 * time.Second).Should(Equal(key))
		eventuallyCondition(ctx, ns, "stripped", "Degraded", "OptionalAPIMissing", "")
	})
})
