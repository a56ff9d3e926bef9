package controller_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

var _ = Describe("nudging the pods that mount the config", func() {
	It("annotates running controller and login pods when their ConfigMaps change, and nothing else", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		sc := applySample(ctx, ns, "nudge")
		// The reconcile that creates the ConfigMaps ends before the pods exist, as the
		// StatefulSets' pods come after it.
		Eventually(func() []metav1.Condition {
			return get(ctx, &slurmv1alpha1.SlurmCluster{}, ns, sc.Name).Status.Conditions
		}).WithTimeout(timeout).ShouldNot(BeEmpty())
		pod := func(comp slurmv1alpha1.Component, i int, node string) string {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nudge-%s-%d", comp, i), Namespace: ns, Labels: base.Labels(sc, comp)},
				Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "c"}}},
			}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			return p.Name
		}
		ctld := pod(slurmv1alpha1.ComponentController, 0, "node-a")
		login := pod(slurmv1alpha1.ComponentLogin, 0, "node-a")
		pending := pod(slurmv1alpha1.ComponentLogin, 1, "")
		worker := pod(slurmv1alpha1.ComponentWorker, 0, "node-a")
		seen := func(name string) func() string {
			return func() string {
				return get(ctx, &corev1.Pod{}, ns, name).Annotations[controller.AnnotationConfigSeen]
			}
		}
		// Pods that started with the ConfigMaps as they are: no write.
		for _, name := range []string{ctld, login, pending, worker} {
			Consistently(seen(name)).WithTimeout(2*time.Second).Should(BeEmpty(), name)
		}

		// A new node list: slurmctld and the login node are told at once.
		Expect(k8sClient.Patch(ctx, sc, client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"slurmNodes":{"worker":{"size":9}}}}`)))).To(Succeed())
		Eventually(seen(ctld)).WithTimeout(timeout).ShouldNot(BeEmpty())
		Eventually(seen(login)).WithTimeout(timeout).ShouldNot(BeEmpty())
		ctldVersion, loginVersion := seen(ctld)(), seen(login)()
		// Not a pod the kubelet has not taken yet, nor a worker (configless).
		Consistently(seen(pending)).WithTimeout(2 * time.Second).Should(BeEmpty())
		Expect(seen(worker)()).To(BeEmpty())

		// A new root key: only the login node mounts it.
		Expect(k8sClient.Get(ctx, key(ns, sc.Name), sc)).To(Succeed())
		sc.Spec.SlurmNodes.Login.SSHRootPublicKeys = append(sc.Spec.SlurmNodes.Login.SSHRootPublicKeys, slurmv1alpha1.SSHPublicKey("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL6PURsm3u/Or5NEY/t9D/4KxmiaXkQm7LjpgXVhKEoX second"))
		Expect(k8sClient.Update(ctx, sc)).To(Succeed())
		Eventually(seen(login)).WithTimeout(timeout).ShouldNot(Equal(loginVersion))
		Consistently(seen(ctld)).WithTimeout(2 * time.Second).Should(Equal(ctldVersion))
	})
})
