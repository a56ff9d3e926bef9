package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// A replaced pod keeps its name and gets a new address. slurmctld resolved the name once and
// keeps sending to the old address; the operator must tell it the new one.
var _ = Describe("a worker pod replaced at a new address", func() {
	It("is reached by slurmctld at its new address and runs a job there", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "moved", 2, nil)
		cluster, client, _ := startSlurmFromAPI(ctx, ns, sc, 2)
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		host := func(i int32) slurmharness.Host {
			return slurmharness.Host{Name: sc.PodName(slurmv1alpha1.ComponentWorker, i), SlurmName: slurmv1alpha1.SlurmNodeName(slurmv1alpha1.ComponentWorker, i)}
		}
		// The kubelet's part: the pods run, each with its host's address.
		for i := int32(0); i < 2; i++ {
			workerPod(ctx, ns, "moved", int(i), "r1", true)
			setPodIP(ctx, ns, host(i).Name, cluster.Addr(host(i).Name))
		}
		Expect(cluster.WaitFor(hctx, "worker-1 idle", func() (bool, error) {
			out, err := cluster.Exec(hctx, "moved-login-0", "sinfo", "-h", "-n", "worker-1", "-o", "%t")
			return err == nil && out == "idle\n", nil
		})).To(Succeed())
		// slurmctld launches a batch job on worker-1 at its first address: it has resolved the
		// name, and will not again.
		out, err := cluster.Exec(hctx, "moved-login-0", "timeout", "40", "sbatch", "--wait", "-w", "worker-1", "-o", "/tmp/first.out", "--wrap", "true")
		Expect(err).NotTo(HaveOccurred(), out)
		first := cluster.Addr(host(1).Name)

		By("the pod is replaced: same name, a new address")
		Expect(k8sClient.Delete(ctx, get(ctx, &corev1.Pod{}, ns, host(1).Name))).To(Succeed())
		Eventually(podGone(ctx, ns, host(1).Name)).WithTimeout(timeout).Should(BeTrue())
		Expect(cluster.MoveWorker(hctx, host(1))).To(Succeed())
		moved := cluster.Addr(host(1).Name)
		Expect(moved).NotTo(Equal(first))
		workerPod(ctx, ns, "moved", 1, "r1", true)
		setPodIP(ctx, ns, host(1).Name, moved)

		By("the operator sets worker-1's address in Slurm, and only worker-1's")
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Address).To(Equal(moved))
		}).WithTimeout(timeout).Should(Succeed())
		n0, err := client.Node(ctx, "worker-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(n0.Address).To(Equal(cluster.Addr(host(0).Name)))

		By("a batch job runs on worker-1 at once: slurmctld launches it at the new address")
		// srun would resolve the name itself; a batch job is launched by slurmctld.
		out, err = cluster.Exec(hctx, "moved-login-0", "timeout", "40", "sbatch", "--wait", "-w", "worker-1", "-o", "/tmp/moved.out", "--wrap", "hostname")
		Expect(err).NotTo(HaveOccurred(), out+cluster.Logs(slurmconf.ControllerHost(sc, 0)))
		n1, err := client.Node(ctx, "worker-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(n1.Down()).To(BeFalse(), "worker-1 is %v", n1.State)
	})
})

// setPodIP plays the kubelet: the pod gets its address.
func setPodIP(ctx SpecContext, ns, name, ip string) {
	Eventually(func() error {
		p := get(ctx, &corev1.Pod{}, ns, name)
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		return k8sClient.Status().Update(ctx, p)
	}).WithTimeout(timeout).Should(Succeed())
}
