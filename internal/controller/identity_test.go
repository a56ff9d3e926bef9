package controller_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
)

var _ = Describe("users from the site's directory (spec.identity.sssd)", func() {
	It("waits for the admin's labelled Secret, naming the field; then slurmctld, the login and the worker pods run SSSD, and a change to the Secret rolls them", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_directory")
		Expect(err).NotTo(HaveOccurred())
		sc.Namespace = ns
		Expect(k8sClient.Create(ctx, sc)).To(Succeed())
		field := "spec.identity.sssd.configSecretName"

		By("no Secret: nothing is rendered, and Degraded names the field")
		eventuallyCondition(ctx, ns, sc.Name, slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ReasonIdentitySecretMissing, "Secret sssd-config ("+field+") does not exist")
		Consistently(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, sc.Name+"-worker"), &appsv1.StatefulSet{}))
		}).WithTimeout(3*time.Second).Should(BeTrue(), "workers rendered that would wait for a Secret volume")

		By("a Secret that did not opt in is not read")
		const conf = "[sssd]\nservices = nss, pam, ssh\ndomains = directory\n[domain/directory]\nid_provider = ldap\n"
		// services lack ssh, which the default sshKeys needs.
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sssd-config", Namespace: ns},
			Data: map[string][]byte{"sssd.conf": []byte(strings.Replace(conf, ", ssh", "", 1)), "ca.crt": []byte("a CA")}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		// Secrets the operator did not make are not watched: a spec change brings the next look.
		updateSpec(ctx, ns, sc.Name, func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 3 })
		eventuallyCondition(ctx, ns, sc.Name, slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ReasonIdentitySecretNotAllowed, field+") is not labelled "+slurmv1alpha1.LabelAllowReference)

		By("labelled, with an sssd.conf the pods cannot use: nothing is rendered, and Degraded says what is missing")
		secret.Labels = map[string]string{slurmv1alpha1.LabelAllowReference: "true"}
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		updateSpec(ctx, ns, sc.Name, func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 2 })
		eventuallyCondition(ctx, ns, sc.Name, slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ReasonIdentitySecretInvalid, field+") key sssd.conf: [sssd] services = \"nss, pam\" lacks ssh")
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, sc.Name+"-worker"), &appsv1.StatefulSet{}))).To(BeTrue())

		By("a usable sssd.conf: the controller, login and worker pods run SSSD beside their Slurm")
		secret.Data["sssd.conf"] = []byte(conf)
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		updateSpec(ctx, ns, sc.Name, func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 3 })
		templates := func(g Gomega) map[string]corev1.PodTemplateSpec {
			out := map[string]corev1.PodTemplateSpec{}
			for _, c := range []slurmv1alpha1.Component{slurmv1alpha1.ComponentController, slurmv1alpha1.ComponentLogin, slurmv1alpha1.ComponentWorker} {
				sts := &appsv1.StatefulSet{}
				g.Expect(k8sClient.Get(ctx, key(ns, sc.ComponentName(c)), sts)).To(Succeed())
				out[string(c)] = sts.Spec.Template
			}
			return out
		}
		var first map[string]corev1.PodTemplateSpec
		Eventually(func(g Gomega) {
			first = templates(g)
			for c, tpl := range first {
				var names []string
				for _, ic := range tpl.Spec.InitContainers {
					names = append(names, ic.Name)
				}
				g.Expect(names).To(ContainElement("sssd"), c)
				g.Expect(tpl.Annotations).To(HaveKey(base.AnnotationSSSDConfigHash), c)
			}
		}).WithTimeout(timeout).Should(Succeed())
		cm := get(ctx, &corev1.ConfigMap{}, ns, sc.IdentityConfigMapName())
		Expect(cm.Data[base.IdentityNSSwitchKey]).To(ContainSubstring("passwd:         files sss"))

		By("a changed Secret: a new hash on every template that runs SSSD")
		secret.Data["sssd.conf"] = []byte(conf + "ldap_uri = ldaps://ldap.example.org\n")
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		// The Secret is not watched: the next reconcile reads it (a spec change here, or the
		// periodic look within 30 s).
		updateSpec(ctx, ns, sc.Name, func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 2 })
		var second map[string]corev1.PodTemplateSpec
		Eventually(func(g Gomega) {
			second = templates(g)
			for c, tpl := range second {
				g.Expect(tpl.Annotations[base.AnnotationSSSDConfigHash]).NotTo(Equal(first[c].Annotations[base.AnnotationSSSDConfigHash]), c)
			}
		}).WithTimeout(timeout).Should(Succeed())

		By("the Secret deleted under a running cluster: Degraded says so, the pods keep what they mounted, and the rest goes on")
		Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
		updateSpec(ctx, ns, sc.Name, func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 4 })
		eventuallyCondition(ctx, ns, sc.Name, slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ReasonIdentitySecretMissing, "the pods keep the configuration they have")
		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, sc.Name+"-worker").Spec.Replicas
		}).WithTimeout(timeout).Should(Equal(int32(4)), "a scale-up while the Secret is gone")
		Consistently(func(g Gomega) {
			for c, tpl := range templates(g) {
				g.Expect(tpl.Annotations[base.AnnotationSSSDConfigHash]).To(Equal(second[c].Annotations[base.AnnotationSSSDConfigHash]), c)
			}
		}).WithTimeout(3 * time.Second).Should(Succeed())
	})
})
