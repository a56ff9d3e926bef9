package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("children edited by someone else", func() {
	It("get the operator's fields back, keep the others' own fields, and cost no write when nothing drifted", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "drift")
		get(ctx, &appsv1.StatefulSet{}, ns, "drift-worker")
		conf := slurmConf(ctx, ns, "drift")

		By("kubectl edit of the worker StatefulSet's replicas and the Slurm config, as another field manager")
		Eventually(func() error {
			s := get(ctx, &appsv1.StatefulSet{}, ns, "drift-worker")
			s.Spec.Replicas = ptr.To[int32](2)
			s.Labels["team"] = "ml" // theirs: stays
			return k8sClient.Update(ctx, s, client.FieldOwner("kubectl-edit"))
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func() error {
			cm := get(ctx, &corev1.ConfigMap{}, ns, "drift-slurm-config")
			cm.Data["slurm-base.conf"] = "SlurmctldHost=elsewhere\n"
			return k8sClient.Update(ctx, cm, client.FieldOwner("kubectl-edit"))
		}).WithTimeout(timeout).Should(Succeed())

		Eventually(func(g Gomega) {
			s := &appsv1.StatefulSet{}
			g.Expect(k8sClient.Get(ctx, key(ns, "drift-worker"), s)).To(Succeed())
			g.Expect(*s.Spec.Replicas).To(Equal(int32(8)))
			g.Expect(s.Labels).To(HaveKeyWithValue("team", "ml"))
			g.Expect(slurmConf(ctx, ns, "drift")).To(Equal(conf))
		}).WithTimeout(timeout).Should(Succeed())

		By("once restored, nothing is applied again")
		rv := func() []string {
			return []string{
				get(ctx, &appsv1.StatefulSet{}, ns, "drift-worker").ResourceVersion,
				get(ctx, &corev1.ConfigMap{}, ns, "drift-slurm-config").ResourceVersion,
			}
		}
		before := rv()
		Consistently(rv).WithTimeout(3 * time.Second).Should(Equal(before))

		By("kubectl scale of the controller StatefulSet to zero, through its scale subresource: the spec's size comes back")
		Eventually(func() error {
			scale := &autoscalingv1.Scale{}
			if err := k8sClient.SubResource("scale").Get(ctx, get(ctx, &appsv1.StatefulSet{}, ns, "drift-controller"), scale); err != nil {
				return err
			}
			scale.Spec.Replicas = 0
			return k8sClient.SubResource("scale").Update(ctx, get(ctx, &appsv1.StatefulSet{}, ns, "drift-controller"),
				client.WithSubResourceBody(scale), client.FieldOwner("kubectl"))
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "drift-controller").Spec.Replicas
		}).WithTimeout(timeout).Should(Equal(int32(1)))
	})
})
