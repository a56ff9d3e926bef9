package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

var _ = Describe("optional APIs", func() {
	It("renders the ServiceMonitor once the Prometheus operator's API is installed, without a change to the cluster", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc := applySample(ctx, ns, "monitored") // the exporter is on
		eventuallyCondition(ctx, ns, "monitored", slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ReasonOptionalAPIMissing, "monitoring.coreos.com")

		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "servicemonitors", Singular: "servicemonitor", Kind: "ServiceMonitor", ListKind: "ServiceMonitorList"},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true),
					}},
				}},
			},
		}
		Expect(k8sClient.Create(ctx, crd)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(k8sClient.Delete(ctx, crd)).To(Succeed())
		})

		Eventually(func(g Gomega) {
			sm := &unstructured.Unstructured{}
			sm.SetAPIVersion("monitoring.coreos.com/v1")
			sm.SetKind("ServiceMonitor")
			g.Expect(k8sClient.Get(ctx, key(ns, sc.ComponentName(slurmv1alpha1.ComponentExporter)), sm)).To(Succeed())
			cur := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "monitored"), cur)).To(Succeed())
			g.Expect(meta.FindStatusCondition(cur.Status.Conditions, slurmv1alpha1.ConditionDegraded).Reason).NotTo(Equal(slurmv1alpha1.ReasonOptionalAPIMissing))
			g.Expect(cur.Generation).To(Equal(sc.Generation), "the cluster was not touched")
		}).WithTimeout(timeout).Should(Succeed())
	})
})
