package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

var _ = Describe("the exporter's token", func() {
	It("is a token for slurm-metrics in its own Secret, the exporter mounts no key, and one near its expiry or not signed with the key is renewed", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc := applySample(ctx, ns, "tok")
		jwtKey := get(ctx, &corev1.Secret{}, ns, sc.JWTKeySecretName()).Data[slurmfacts.JWTKeyFile]
		var first slurm.TokenClaims
		Eventually(func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, key(ns, sc.ExporterTokenSecretName()), s)).To(Succeed())
			c, err := slurm.VerifyToken(jwtKey, string(s.Data["token"]))
			g.Expect(err).NotTo(HaveOccurred())
			first = c
		}).WithTimeout(timeout).Should(Succeed())
		Expect(first.User).To(Equal(slurmfacts.MetricsUser))
		Expect(first.Expires).To(BeTemporally("~", time.Now().Add(controller.DefaultExporterTokenLifetime), time.Minute))

		dep := get(ctx, &appsv1.Deployment{}, ns, sc.ComponentName(slurmv1alpha1.ComponentExporter))
		for _, v := range dep.Spec.Template.Spec.Volumes {
			Expect(v.Secret == nil || v.Secret.SecretName != sc.JWTKeySecretName()).To(BeTrue(), "the exporter mounts the JWT key")
		}
		Expect(dep.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--token-file=/etc/slurm-exporter/token"))

		// A token with less than half its lifetime left is replaced by a new one.
		old, err := slurm.Token(jwtKey, slurmfacts.MetricsUser, time.Now().Add(-59*time.Minute), time.Hour)
		Expect(err).NotTo(HaveOccurred())
		otherKey, err := slurm.Token([]byte("another key, not the cluster's.."), slurmfacts.MetricsUser, time.Now(), time.Hour)
		Expect(err).NotTo(HaveOccurred())
		for _, stale := range []string{old, "not a token", otherKey} {
			s := get(ctx, &corev1.Secret{}, ns, sc.ExporterTokenSecretName())
			s.Data["token"] = []byte(stale)
			Expect(k8sClient.Update(ctx, s)).To(Succeed())
			Eventually(func(g Gomega) {
				s := &corev1.Secret{}
				g.Expect(k8sClient.Get(ctx, key(ns, sc.ExporterTokenSecretName()), s)).To(Succeed())
				c, err := slurm.VerifyToken(jwtKey, string(s.Data["token"]))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.User).To(Equal(slurmfacts.MetricsUser))
				g.Expect(c.Expires).To(BeTemporally(">", time.Now().Add(controller.DefaultExporterTokenLifetime/2)))
			}).WithTimeout(timeout).Should(Succeed(), "the token %.20q was not renewed", stale)
		}

		// A valid token is kept: the operator does not write the Secret again.
		s := get(ctx, &corev1.Secret{}, ns, sc.ExporterTokenSecretName())
		updateSpec(ctx, ns, "tok", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size++ })
		Consistently(func() string {
			return get(ctx, &corev1.Secret{}, ns, sc.ExporterTokenSecretName()).ResourceVersion
		}).WithTimeout(3 * time.Second).Should(Equal(s.ResourceVersion))
	})
})
