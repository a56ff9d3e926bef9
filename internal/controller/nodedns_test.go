package controller_test

import (
	"fmt"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

var _ = Describe("the Slurm node names", func() {
	It("name each node's pod address in the cluster's own EndpointSlice, searched by its pods, and two clusters in one namespace do not clash", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		a, b := applySample(ctx, ns, "alpha"), applySample(ctx, ns, "beta")
		// Play the StatefulSet controller and the kubelet: a pod with an address.
		pod := func(sc *slurmv1alpha1.SlurmCluster, comp slurmv1alpha1.Component, i int, ip string) {
			labels := base.Labels(sc, comp)
			labels[base.LabelPodIndex] = strconv.Itoa(i)
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", sc.Name, comp, i), Namespace: ns, Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}},
			}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
			Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
		}
		pod(a, slurmv1alpha1.ComponentWorker, 1, "10.0.0.11")
		pod(a, slurmv1alpha1.ComponentLogin, 0, "10.0.0.20")
		pod(b, slurmv1alpha1.ComponentWorker, 1, "10.0.1.11")

		names := func(sc *slurmv1alpha1.SlurmCluster) func() map[string]string {
			return func() map[string]string {
				out := map[string]string{}
				s := &discoveryv1.EndpointSlice{}
				if err := k8sClient.Get(ctx, key(ns, sc.NodeNamesServiceName()), s); err != nil {
					return nil
				}
				for _, e := range s.Endpoints {
					out[*e.Hostname] = e.Addresses[0]
				}
				return out
			}
		}
		Eventually(names(a)).WithTimeout(timeout).Should(Equal(map[string]string{"worker-1": "10.0.0.11", "login-0": "10.0.0.20"}))
		Eventually(names(b)).WithTimeout(timeout).Should(Equal(map[string]string{"worker-1": "10.0.1.11"}))

		svc := get(ctx, &corev1.Service{}, ns, a.NodeNamesServiceName())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(svc.Spec.Selector).To(BeEmpty(), "a selector's endpoints would be named after the pods")
		s := get(ctx, &discoveryv1.EndpointSlice{}, ns, a.NodeNamesServiceName())
		Expect(s.Labels).To(HaveKeyWithValue(discoveryv1.LabelServiceName, a.NodeNamesServiceName()))
		Expect(s.Labels[discoveryv1.LabelManagedBy]).NotTo(Equal("endpointslice-controller.k8s.io"))

		// Every pod searches its own cluster's names, not the other's.
		for _, sc := range []*slurmv1alpha1.SlurmCluster{a, b} {
			for _, comp := range []slurmv1alpha1.Component{slurmv1alpha1.ComponentController, slurmv1alpha1.ComponentWorker, slurmv1alpha1.ComponentLogin} {
				sts := get(ctx, &appsv1.StatefulSet{}, ns, sc.ComponentName(comp))
				Expect(sts.Spec.Template.Spec.DNSConfig.Searches).To(ContainElement(sc.NodeNamesServiceName()+"."+ns+".svc.cluster.local"), sts.Name)
			}
		}

		// A pod that leaves takes its name with it.
		Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "alpha-login-0", Namespace: ns}})).To(Succeed())
		Eventually(names(a)).WithTimeout(timeout).Should(Equal(map[string]string{"worker-1": "10.0.0.11"}))
	})
})
