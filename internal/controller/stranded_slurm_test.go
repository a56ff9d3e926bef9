package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

// A Kubernetes node that dies leaves its pods Terminating for ever: no kubelet confirms their
// deletion. The operator must say so, and must not let such a pod hold every other worker's
// update.
var _ = Describe("a worker pod stranded on a lost Kubernetes node", func() {
	It("is reported with its node, does not block the other workers' update, and its node is tainted out of service when the operator may", func(ctx SpecContext) {
		// As the chart does with outOfServiceTaintAfter set: the operator may patch nodes.
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "slurm-operator-out-of-service"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"patch"}}}}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: kube.OperatorUserName}}}
		for _, o := range []client.Object{role, binding} {
			if err := k8sClient.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		}
		good, lost := k8sNode(ctx, "strand-good", corev1.ConditionTrue), k8sNode(ctx, "strand-lost", corev1.ConditionUnknown)

		ns, sc := minimalCluster(ctx, "strand", 2, nil)
		startSlurmFromAPI(ctx, ns, sc, 2)
		workerPodOn(ctx, ns, "strand", 0, "old", true, good)
		workerPodOn(ctx, ns, "strand", 1, "old", true, lost)

		By("worker-1's node is lost while its pod is being deleted: the pod stays Terminating")
		p1 := get(ctx, &corev1.Pod{}, ns, "strand-worker-1")
		Expect(k8sClient.Delete(ctx, p1, client.GracePeriodSeconds(1))).To(Succeed())
		time.Sleep(2 * time.Second)
		Expect(get(ctx, &corev1.Pod{}, ns, "strand-worker-1").DeletionTimestamp).NotTo(BeNil())

		By("the status and an event name the pod and its node")
		eventuallyCondition(ctx, ns, "strand", "Degraded", "WorkerNodeLost", "pod strand-worker-1 on node strand-lost")
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			found := false
			for _, e := range list.Items {
				found = found || e.Reason == "WorkerNodeLost"
			}
			g.Expect(found).To(BeTrue())
		}).WithTimeout(timeout).Should(Succeed())

		By("an update of the workers replaces worker-0 although worker-1 cannot go")
		publishRevision(ctx, ns, "strand", 2, "old", "new")
		// Deleted (no kubelet here confirms it, so it stays Terminating).
		Eventually(func() *metav1.Time {
			return get(ctx, &corev1.Pod{}, ns, "strand-worker-0").DeletionTimestamp
		}).WithTimeout(timeout).ShouldNot(BeNil())

		By("the lost node, not ready for longer than the operator's limit, is tainted out of service")
		Eventually(func() []corev1.Taint {
			return get(ctx, &corev1.Node{}, "", lost).Spec.Taints
		}).WithTimeout(timeout).Should(ContainElement(HaveField("Key", corev1.TaintNodeOutOfService)))
		Expect(get(ctx, &corev1.Node{}, "", good).Spec.Taints).NotTo(ContainElement(HaveField("Key", corev1.TaintNodeOutOfService)))
	})
})

// k8sNode creates a Kubernetes node whose Ready condition has had this status for two minutes.
func k8sNode(ctx SpecContext, name string, ready corev1.ConditionStatus) string {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(k8sClient.Create(ctx, n)).To(Succeed())
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready,
		LastTransitionTime: metav1.NewTime(time.Now().Add(-2 * time.Minute)), LastHeartbeatTime: metav1.Now()}}
	Expect(k8sClient.Status().Update(ctx, n)).To(Succeed())
	return name
}
