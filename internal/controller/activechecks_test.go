package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

var _ = Describe("active checks against a real Slurm cluster", func() {
	It("drains the worker whose check fails with the check's output, and the status names the check, the output and the next run", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "chk", 2, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.ActiveChecks = []slurmv1alpha1.ActiveCheck{{
				Name:   "marker",
				Script: "if [ -e /shared/broken-$SLURMD_NODENAME ]; then echo \"marker says $SLURMD_NODENAME is broken\"; exit 1; fi\necho fine",
			}}
		})
		cluster, client, _ := startSlurmFromAPI(ctx, ns, sc, 2)
		Expect(os.WriteFile(filepath.Join(cluster.SharedDir(), "broken-worker-1"), nil, 0o644)).To(Succeed())
		for i := 0; i < 2; i++ {
			workerPod(ctx, ns, "chk", i, "rev", true)
		}

		By("worker-1 is drained with the check's output; worker-0 passes and stays in service")
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeTrue())
			g.Expect(n.Reason).To(Equal("slurm-operator: check marker: marker says worker-1 is broken"))
		}).WithTimeout(90 * time.Second).Should(Succeed()) // the first look at a started Slurm may be 30 s away
		n0, err := client.Node(ctx, "worker-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(n0.Has("DRAIN")).To(BeFalse(), n0.Reason)

		By("the status: the check's last and next run, one worker passed, worker-1 failing; worker-1 out of service until its next check")
		Eventually(func(g Gomega) {
			cur := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "chk"), cur)).To(Succeed())
			g.Expect(cur.Status.ActiveChecks).To(HaveLen(1))
			st := cur.Status.ActiveChecks[0]
			g.Expect(st.Name).To(Equal("marker"))
			g.Expect(st.Passed).To(Equal(int32(1)))
			g.Expect(st.Failing).To(HaveLen(1))
			g.Expect([]string{st.Failing[0].Node, st.Failing[0].Output}).To(Equal([]string{"worker-1", "marker says worker-1 is broken"}))
			g.Expect(st.Failing[0].Since).NotTo(BeNil())
			g.Expect(st.LastRunTime).NotTo(BeNil())
			g.Expect(st.NextRunTime).NotTo(BeNil())
			g.Expect(st.NextRunTime.Sub(st.LastRunTime.Time)).To(BeNumerically("~", time.Hour, 5*time.Second))
			g.Expect(cur.Status.Workers.OutOfService).To(HaveLen(1))
			o := cur.Status.Workers.OutOfService[0]
			g.Expect(o.Name).To(Equal("worker-1"))
			g.Expect(o.NextCheck).NotTo(BeNil())
			g.Expect(time.Until(o.NextCheck.Time)).To(BeNumerically("~", time.Hour, 2*time.Minute))
			// The operator's metrics say the same: since when worker-1 fails, when it is checked next.
			series := map[string]string{"namespace": ns, "slurmcluster": "chk", "check": "marker", "node": "worker-1"}
			since, ok := metricValue("slurm_operator_active_check_failing_since_timestamp_seconds", series)
			g.Expect(ok).To(BeTrue())
			g.Expect(since).To(Equal(float64(st.Failing[0].Since.Unix())))
			next, ok := metricValue("slurm_operator_active_check_next_run_timestamp_seconds", series)
			g.Expect(ok).To(BeTrue())
			g.Expect(next).To(Equal(float64(o.NextCheck.Unix())))
			_, ok = metricValue("slurm_operator_active_check_next_run_timestamp_seconds", map[string]string{"namespace": ns, "node": "worker-0"})
			g.Expect(ok).To(BeFalse(), "a next-check series for worker-0, which passed")
		}).WithTimeout(timeout).Should(Succeed())
		out, err := cluster.Exec(context.Background(), "chk-login-0", "squeue", "-t", "all", "-h", "-o", "%j|%u|%N|%T")
		Expect(err).NotTo(HaveOccurred())
		for _, w := range []string{"worker-0", "worker-1"} {
			Expect(out).To(ContainSubstring("slurm-operator-check-marker|slurm|"+w+"|"), "the check ran on %s as the slurm user", w)
		}

		By("the check removed from the spec: the status forgets it, and its drain is lifted")
		cur := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, key(ns, "chk"), cur)).To(Succeed())
		cur.Spec.ActiveChecks = nil
		Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, "chk"), cur)).To(Succeed())
			g.Expect(cur.Status.ActiveChecks).To(BeEmpty())
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeFalse(), n.Reason)
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			for _, m := range []string{"slurm_operator_active_check_failing_since_timestamp_seconds", "slurm_operator_active_check_next_run_timestamp_seconds"} {
				_, ok := metricValue(m, map[string]string{"namespace": ns, "slurmcluster": "chk"})
				g.Expect(ok).To(BeFalse(), m)
			}
		}).WithTimeout(timeout).Should(Succeed())
	})
})
