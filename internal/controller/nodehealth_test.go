package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

var _ = Describe("Kubernetes node health against a real Slurm cluster", func() {
	It("drains a worker whose node is cordoned, not ready or has a named condition, resumes it when healthy, and leaves an admin's drain alone", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "health", 2, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.DrainOnNodeConditions = []string{"KernelDeadlock"}
		})
		cluster, client, _ := startSlurmFromAPI(ctx, ns, sc, 2)
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()

		// Two Kubernetes nodes, ready, each running one worker pod.
		nodeNames := []string{ns + "-node-a", ns + "-node-b"}
		for i, name := range nodeNames {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
			Expect(k8sClient.Create(ctx, n)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(k8sClient.Delete(ctx, n)).To(Succeed()) })
			setReady(ctx, name, corev1.ConditionTrue)
			workerPodOn(ctx, ns, "health", i, "rev", true, name)
		}
		node := func(name string) func(Gomega) slurm.Node {
			return func(g Gomega) slurm.Node {
				n, err := client.Node(ctx, name)
				g.Expect(err).NotTo(HaveOccurred())
				return n
			}
		}
		Consistently(func(g Gomega) { g.Expect(node("worker-1")(g).Has("DRAIN")).To(BeFalse()) }).WithTimeout(3 * time.Second).Should(Succeed())

		By("cordoning node-b: worker-1 is drained, naming the node")
		cordon(ctx, nodeNames[1], true)
		Eventually(func(g Gomega) {
			n := node("worker-1")(g)
			g.Expect(n.Has("DRAIN")).To(BeTrue())
			g.Expect(n.Reason).To(Equal(slurmfacts.DrainKubernetesNode + " " + nodeNames[1] + " is cordoned"))
		}).WithTimeout(timeout).Should(Succeed())

		By("the status lists worker-1 out of service, with the reason, who set it and since when")
		Eventually(func(g Gomega) {
			cur := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "health"), cur)).To(Succeed())
			g.Expect(cur.Status.Workers.OutOfService).To(HaveLen(1))
			o := cur.Status.Workers.OutOfService[0]
			g.Expect([]string{o.Name, o.State, o.SetBy, o.Reason}).To(Equal([]string{"worker-1", "drained", "operator", slurmfacts.DrainKubernetesNode + " " + nodeNames[1] + " is cordoned"}))
			g.Expect(o.Since).NotTo(BeNil())
			g.Expect(time.Since(o.Since.Time)).To(BeNumerically("<", 5*time.Minute))
		}).WithTimeout(timeout).Should(Succeed())

		Eventually(func(g Gomega) {
			v, _ := metricValue("slurm_operator_workers_drained_for_node_health", map[string]string{"namespace": ns, "slurmcluster": "health"})
			g.Expect(v).To(Equal(1.0))
		}).WithTimeout(timeout).Should(Succeed())

		By("uncordoning it: the drain is lifted")
		cordon(ctx, nodeNames[1], false)
		Eventually(func(g Gomega) { g.Expect(node("worker-1")(g).Has("DRAIN")).To(BeFalse()) }).WithTimeout(timeout).Should(Succeed())

		By("node-b not ready: drained again, saying so")
		setReady(ctx, nodeNames[1], corev1.ConditionFalse)
		Eventually(func(g Gomega) {
			g.Expect(node("worker-1")(g).Reason).To(Equal(slurmfacts.DrainKubernetesNode + " " + nodeNames[1] + " is not ready"))
		}).WithTimeout(timeout).Should(Succeed())
		setReady(ctx, nodeNames[1], corev1.ConditionTrue)
		Eventually(func(g Gomega) { g.Expect(node("worker-1")(g).Has("DRAIN")).To(BeFalse()) }).WithTimeout(timeout).Should(Succeed())

		By("node-b with Node Problem Detector's KernelDeadlock True: drained with the condition's words; False again: resumed")
		setConditions(ctx, nodeNames[1], corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionTrue, Reason: "DockerHung", Message: "task docker:7 blocked for more than 120 seconds."})
		Eventually(func(g Gomega) {
			n := node("worker-1")(g)
			g.Expect(n.Has("DRAIN")).To(BeTrue())
			g.Expect(n.Reason).To(Equal(slurmfacts.DrainKubernetesNode + " " + nodeNames[1] + " has condition KernelDeadlock (DockerHung: task docker:7 blocked for more than 120 seconds.)"))
		}).WithTimeout(timeout).Should(Succeed())
		By("a condition not named (FrequentKubeletRestart True) with KernelDeadlock False: resumed")
		setConditions(ctx, nodeNames[1], corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionFalse, Reason: "KernelHasNoDeadlock"},
			corev1.NodeCondition{Type: "FrequentKubeletRestart", Status: corev1.ConditionTrue, Reason: "FrequentKubeletRestart"})
		Eventually(func(g Gomega) { g.Expect(node("worker-1")(g).Has("DRAIN")).To(BeFalse()) }).WithTimeout(timeout).Should(Succeed())

		By("an admin drains worker-0 first, then node-a is cordoned and uncordoned: the admin's drain stays")
		_, err := cluster.Exec(hctx, "health-login-0", "scontrol", "update", "nodename=worker-0", "state=drain", "reason=disk check by admin")
		Expect(err).NotTo(HaveOccurred())
		cordon(ctx, nodeNames[0], true)
		Consistently(func(g Gomega) { g.Expect(node("worker-0")(g).Reason).To(Equal("disk check by admin")) }).WithTimeout(4 * time.Second).Should(Succeed())
		cordon(ctx, nodeNames[0], false)
		Consistently(func(g Gomega) {
			n := node("worker-0")(g)
			g.Expect(n.Has("DRAIN")).To(BeTrue())
			g.Expect(n.Reason).To(Equal("disk check by admin"))
		}).WithTimeout(4 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			cur := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "health"), cur)).To(Succeed())
			g.Expect(cur.Status.Workers.OutOfService).To(HaveLen(1))
			o := cur.Status.Workers.OutOfService[0]
			g.Expect([]string{o.Name, o.SetBy, o.Reason}).To(Equal([]string{"worker-0", "admin", "disk check by admin"}))
		}).WithTimeout(timeout).Should(Succeed())
	})
})

func cordon(ctx SpecContext, name string, on bool) {
	Eventually(func() error {
		n := &corev1.Node{}
		if err := k8sClient.Get(ctx, key("", name), n); err != nil {
			return err
		}
		n.Spec.Unschedulable = on
		return k8sClient.Update(ctx, n)
	}).WithTimeout(timeout).Should(Succeed())
}

func setReady(ctx SpecContext, name string, status corev1.ConditionStatus) {
	Eventually(func() error {
		n := &corev1.Node{}
		if err := k8sClient.Get(ctx, key("", name), n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		return k8sClient.Status().Update(ctx, n)
	}).WithTimeout(timeout).Should(Succeed())
}

// setConditions sets the node's conditions: Ready True, then these.
func setConditions(ctx SpecContext, name string, conds ...corev1.NodeCondition) {
	Eventually(func() error {
		n := &corev1.Node{}
		if err := k8sClient.Get(ctx, key("", name), n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		for _, c := range conds {
			c.LastHeartbeatTime, c.LastTransitionTime = metav1.Now(), metav1.Now()
			n.Status.Conditions = append(n.Status.Conditions, c)
		}
		return k8sClient.Status().Update(ctx, n)
	}).WithTimeout(timeout).Should(Succeed())
}
