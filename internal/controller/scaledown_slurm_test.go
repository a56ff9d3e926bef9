package controller_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// This spec joins the two real worlds: the operator reconciles against the API server, and
// talks to a real slurmctld (through slurmrestd) started from the ConfigMap and Secrets it
// wrote. The test plays the kubelet: it copies the ConfigMap into the Slurm hosts and removes a
// worker host when the StatefulSet shrinks.
var _ = Describe("scaling down against a real Slurm cluster", func() {
	It("drains the leaving worker, waits for its job, then shrinks the StatefulSet", func(ctx SpecContext) {
		root := os.Getenv("SLURM_ROOTFS")
		if root == "" {
			Skip("SLURM_ROOTFS is not set: run 'make test'")
		}
		ns := newNamespace(ctx)
		sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_minimal")
		Expect(err).NotTo(HaveOccurred())
		sc.Namespace, sc.Name = ns, "demo"
		sc.Spec.SlurmNodes.Worker.Size = 4
		Expect(k8sClient.Create(ctx, sc)).To(Succeed())

		By("starting Slurm hosts from what the operator wrote")
		files := func() map[string][]byte {
			cm := get(ctx, &corev1.ConfigMap{}, ns, "demo-slurm-config")
			out := map[string][]byte{}
			for k, v := range cm.Data {
				out[k] = []byte(v)
			}
			return out
		}
		Eventually(func() string { return slurmConf(ctx, ns, "demo") }).WithTimeout(timeout).Should(ContainSubstring("worker-[0-3]"))
		munge := get(ctx, &corev1.Secret{}, ns, "demo-munge-key").Data["munge.key"]
		jwt := get(ctx, &corev1.Secret{}, ns, "demo-jwt-key").Data["jwt_hs256.key"]
		var workers []slurmharness.Host
		for i := 0; i < 4; i++ {
			workers = append(workers, slurmharness.Host{Name: sc.PodName(slurmv1alpha1.ComponentWorker, int32(i)), SlurmName: slurmv1alpha1.SlurmNodeName(slurmv1alpha1.ComponentWorker, int32(i))})
		}
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cluster, err := slurmharness.Start(hctx, slurmharness.Config{
			RootFS: root, SlurmFiles: files(), MungeKey: munge, JWTKey: jwt,
			Controller: slurmharness.Host{Name: slurmconf.ControllerHost(sc, 0)},
			Workers:    workers,
			Logins:     []slurmharness.Host{{Name: "demo-login-0"}},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				GinkgoWriter.Println(cluster.Logs("demo-controller-0"))
			}
			Expect(cluster.Stop()).To(Succeed())
		})
		client, err := slurmtest.StartRestd(hctx, cluster, "demo-controller-0", jwt)
		Expect(err).NotTo(HaveOccurred(), cluster.Logs("demo-controller-0"))
		Expect(slurmtest.StartReconfigureSidecar(cluster, "demo-controller-0")).To(Succeed())
		slurmClients.Store(ns, client)
		DeferCleanup(func() { slurmClients.Delete(ns) })

		By("running a job on worker-3, then asking for 3 workers")
		out, err := cluster.Exec(hctx, "demo-login-0", "sbatch", "-w", "worker-3", "--wrap", "sleep 12")
		Expect(err).NotTo(HaveOccurred())
		job := regexp.MustCompile(`\d+`).FindString(out)
		Eventually(func() string {
			s, _ := cluster.Exec(hctx, "demo-login-0", "squeue", "-h", "-j", job, "-o", "%T")
			return strings.TrimSpace(s)
		}).WithTimeout(timeout).Should(Equal("RUNNING"))
		updateSpec(ctx, ns, "demo", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 3 })

		By("the operator drains worker-3 with its own reason and keeps the pod while the job runs")
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-3")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeTrue())
			g.Expect(n.Reason).To(Equal(slurm.ReasonPrefix + "scale-down"))
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			cur := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "demo"), cur)).To(Succeed())
			c := meta.FindStatusCondition(cur.Status.Conditions, "ScalingDown")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal("WaitingForJobs"))
			g.Expect(c.Message).To(ContainSubstring("worker-3"))
		}).WithTimeout(timeout).Should(Succeed())
		Consistently(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "demo-worker").Spec.Replicas
		}).WithTimeout(4 * time.Second).Should(Equal(int32(4)))
		Expect(slurmConf(ctx, ns, "demo")).To(ContainSubstring("worker-[0-3]"))

		By("once the job ends, the StatefulSet and the node list shrink")
		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "demo-worker").Spec.Replicas
		}).WithTimeout(60 * time.Second).Should(Equal(int32(3)))
		Eventually(func() string { return slurmConf(ctx, ns, "demo") }).WithTimeout(timeout).Should(ContainSubstring("NodeName=worker-[0-2]"))
		state, err := cluster.Exec(hctx, "demo-login-0", "sacct", "-n", "-X", "-P", "-j", job, "-o", "State")
		if err == nil && strings.TrimSpace(state) != "" {
			Expect(strings.TrimSpace(state)).To(Equal("COMPLETED"))
		}
		out, err = cluster.Exec(hctx, "demo-login-0", "scontrol", "show", "job", job)
		if err == nil {
			Expect(out).To(ContainSubstring("JobState=COMPLETED"))
		}

		By("the kubelet's part: the pod goes, the new config lands, the sidecar reconfigures")
		Expect(cluster.StopWorker(hctx, "demo-worker-3")).To(Succeed())
		Expect(cluster.UpdateSlurmFiles(files())).To(Succeed())
		Eventually(func() string {
			s, _ := cluster.Exec(hctx, "demo-login-0", "sinfo", "-h", "-N", "-o", "%N")
			return s
		}).WithTimeout(timeout).ShouldNot(ContainSubstring("worker-3"))
		Eventually(func(g Gomega) {
			cur := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "demo"), cur)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, "ScalingDown")).To(BeTrue())
		}).WithTimeout(timeout).Should(Succeed())
	})
})
