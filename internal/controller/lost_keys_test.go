package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

var _ = Describe("the JWT key and SSH host keys Secrets of a cluster that already ran", func() {
	for _, c := range []struct {
		what, secret, reason string
	}{
		// slurmctld and slurmdbd read the JWT key at start: a new one gets every token refused.
		{"the JWT key Secret", "jwt-key", slurmv1alpha1.ReasonJWTKeyMissing},
		// Users' ssh clients remember the host keys: new ones look like another host.
		{"the SSH host keys Secret", "ssh-host-keys", slurmv1alpha1.ReasonSSHHostKeysMissing},
	} {
		It(c.what+" is never made again when deleted: the condition and an event name it and say how to restore it", func(ctx SpecContext) {
			ns := newNamespace(ctx)
			sc := applySample(ctx, ns, "lost")
			// The cluster ran: its controller StatefulSet exists (what hasRun looks for).
			get(ctx, &appsv1.StatefulSet{}, ns, sc.ComponentName(slurmv1alpha1.ComponentController))
			secret := get(ctx, &corev1.Secret{}, ns, "lost-"+c.secret)
			Expect(get(ctx, &corev1.Secret{}, ns, "lost-munge-key").Data).NotTo(BeEmpty())
			// Degraded is True already (the sample's exporter has no ServiceMonitor API), so the
			// loss is no change of Degraded's status, and still needs its event.
			eventuallyCondition(ctx, ns, "lost", slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ReasonOptionalAPIMissing, "")
			// With the operator stopped, so no reconcile in flight re-applies the Secret it read.
			stopManager()
			Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
			startManager()

			updateSpec(ctx, ns, "lost", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 9 })
			eventuallyCondition(ctx, ns, "lost", slurmv1alpha1.ConditionAvailable, c.reason, secret.Name)
			eventuallyCondition(ctx, ns, "lost", slurmv1alpha1.ConditionDegraded, c.reason, "Restore the Secret from a backup")
			eventuallyCondition(ctx, ns, "lost", slurmv1alpha1.ConditionDegraded, c.reason, "kubectl delete statefulset -n "+ns+" lost-controller")
			Consistently(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, secret.Name), &corev1.Secret{}))
			}).WithTimeout(3*time.Second).Should(BeTrue(), "a new key was made for a cluster that ran with another")
			Expect(slurmConf(ctx, ns, "lost")).NotTo(ContainSubstring("worker-[0-8]"))

			Eventually(func(g Gomega) {
				var list eventsv1.EventList
				g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
				var notes []string
				for _, e := range list.Items {
					if e.Regarding.UID == sc.UID && e.Reason == c.reason {
						notes = append(notes, e.Note)
					}
				}
				g.Expect(notes).To(ContainElement(And(ContainSubstring(secret.Name), ContainSubstring("Restore the Secret"))))
			}).WithTimeout(timeout).Should(Succeed())

			// Restored from a backup, the cluster goes on with its key.
			restored := &corev1.Secret{}
			restored.Namespace, restored.Name = ns, secret.Name
			restored.Labels, restored.OwnerReferences, restored.Data = secret.Labels, secret.OwnerReferences, secret.Data
			Expect(k8sClient.Create(ctx, restored)).To(Succeed())
			Eventually(func() string { return slurmConf(ctx, ns, "lost") }).WithTimeout(timeout).Should(ContainSubstring("worker-[0-8]"))
			Expect(get(ctx, &corev1.Secret{}, ns, secret.Name).Data).To(Equal(secret.Data))
			eventuallyCondition(ctx, ns, "lost", slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ReasonOptionalAPIMissing, "")
		})
	}

	It("are made, with the munge key, for a brand-new cluster", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		applySample(ctx, ns, "new")
		Expect(get(ctx, &corev1.Secret{}, ns, "new-munge-key").Data["munge.key"]).To(HaveLen(1024))
		Expect(get(ctx, &corev1.Secret{}, ns, "new-jwt-key").Data["jwt_hs256.key"]).To(HaveLen(32))
		hostKeys := get(ctx, &corev1.Secret{}, ns, "new-ssh-host-keys").Data
		Expect(hostKeys).To(HaveKey("ssh_host_ed25519_key"))
		Expect(hostKeys).To(HaveKey("ssh_host_ecdsa_key"))
		get(ctx, &appsv1.StatefulSet{}, ns, "new-controller")
		eventuallyCondition(ctx, ns, "new", slurmv1alpha1.ConditionDegraded, slurmv1alpha1.ReasonOptionalAPIMissing, "")
	})
})
