package controller_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// An elastic set run by the operator itself against a real slurmctld started from the
// ConfigMap and Secrets it wrote. The test plays the kubelet: it starts a worker host for each
// replica of the set's StatefulSet and stops the ones above it.
var _ = Describe("an elastic worker set against a real Slurm cluster", func() {
	It("holds no pod at minSize 0, makes both pods of a two-node job, and removes them after the idle timeout", func(ctx SpecContext) {
		root := os.Getenv("SLURM_ROOTFS")
		if root == "" {
			Skip("SLURM_ROOTFS is not set: run 'make test'")
		}
		ns, sc := minimalCluster(ctx, "el", 0, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.GPU = ptr.To[int32](0)
			sc.Spec.SlurmNodes.Worker.Autoscaling = &slurmv1alpha1.Autoscaling{Enabled: true, MaxSize: 2, IdleTimeoutSeconds: 10, ResumeTimeoutSeconds: 60}
		})

		By("every node up to maxSize is in slurm.conf, powered down; the StatefulSet has no pod")
		Eventually(func() string { return slurmConf(ctx, ns, "el") }).WithTimeout(timeout).Should(And(
			ContainSubstring("NodeName=worker-[0-1] NodeAddr=el-worker-[0-1] "), ContainSubstring("State=CLOUD"),
			ContainSubstring("ResumeProgram="+slurmconf.PowerProgram)))
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Replicas }).WithTimeout(timeout).Should(Equal(int32(0)))
		// The pods' slurmd reports its node booted at its start (a pod's kernel uptime is its
		// host's, older than any power-up request); the hosts run the pods' script.
		Expect(get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Template.Spec.Containers[0].Command).To(ContainElement(worker.ElasticWorkerScript))
		env := []string{"SLURM_CONF_SERVER=" + worker.ConfServer(sc)}

		files := map[string][]byte{}
		for k, v := range get(ctx, &corev1.ConfigMap{}, ns, sc.ConfigMapName()).Data {
			files[k] = []byte(v)
		}
		jwt := get(ctx, &corev1.Secret{}, ns, sc.JWTKeySecretName()).Data["jwt_hs256.key"]
		hctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		ctl := slurmconf.ControllerHost(sc, 0)
		cluster, err := slurmharness.Start(hctx, slurmharness.Config{
			RootFS: root, SlurmFiles: files, MungeKey: get(ctx, &corev1.Secret{}, ns, sc.MungeKeySecretName()).Data["munge.key"], JWTKey: jwt,
			Controller: slurmharness.Host{Name: ctl},
			Logins:     []slurmharness.Host{{Name: "el-login-0"}},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				for _, h := range cluster.Hosts() {
					GinkgoWriter.Println(h, cluster.Logs(h))
				}
			}
			Expect(cluster.Stop()).To(Succeed())
		})
		client, err := slurmtest.StartRestd(hctx, cluster, ctl, sc, jwt)
		Expect(err).NotTo(HaveOccurred(), cluster.Logs(ctl))
		slurmClients.Store(ns, client)
		DeferCleanup(func() { slurmClients.Delete(ns) })

		// The kubelet's part: a host per replica, from worker-0 up.
		var mu sync.Mutex
		var running int32
		var kubeletErr error
		kctx, stop := context.WithCancel(hctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for kctx.Err() == nil {
				want := int32(0)
				set := &appsv1.StatefulSet{}
				if err := k8sClient.Get(kctx, key(ns, "el-worker"), set); err == nil && set.Spec.Replicas != nil {
					want = *set.Spec.Replicas
				}
				mu.Lock()
				for running < want && kubeletErr == nil {
					kubeletErr = cluster.AddWorker(kctx, slurmharness.Host{Name: fmt.Sprintf("el-worker-%d", running), SlurmName: fmt.Sprintf("worker-%d", running),
						SlurmdScript: worker.ElasticSlurmdScript, SlurmdEnv: env})
					running++
				}
				for running > want && kubeletErr == nil {
					running--
					kubeletErr = cluster.StopWorker(kctx, fmt.Sprintf("el-worker-%d", running))
				}
				mu.Unlock()
				select {
				case <-kctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		}()
		DeferCleanup(func() { stop(); <-done })
		hosts := func() int32 {
			mu.Lock()
			defer mu.Unlock()
			Expect(kubeletErr).NotTo(HaveOccurred())
			return running
		}
		sinfo := func() string {
			out, _ := cluster.Exec(hctx, "el-login-0", "sh", "-c", "sinfo -N -h -o '%N %t' | sort -u")
			return strings.TrimSpace(out)
		}
		Eventually(sinfo).WithTimeout(timeout).Should(Equal("worker-0 idle~\nworker-1 idle~"))
		Consistently(hosts).WithTimeout(3 * time.Second).Should(Equal(int32(0)))

		By("a two-node job: Slurm powers both nodes up, the operator makes both pods, the job runs on them")
		out, err := cluster.Exec(hctx, "el-login-0", "sbatch", "--parsable", "-N2", "--wrap", "srun hostname")
		Expect(err).NotTo(HaveOccurred(), out)
		job := strings.TrimSpace(out)
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Replicas }).WithTimeout(timeout).Should(Equal(int32(2)))
		Eventually(func() string {
			out, _ := cluster.Exec(hctx, "el-login-0", "scontrol", "show", "job", job)
			return out
		}).WithTimeout(2 * time.Minute).Should(And(ContainSubstring("JobState=COMPLETED"), ContainSubstring("NodeList=worker-[0-1]")))
		Eventually(func() int32 {
			got := &slurmv1alpha1.SlurmCluster{}
			Expect(k8sClient.Get(ctx, key(ns, "el"), got)).To(Succeed())
			return got.Status.Workers.Desired
		}).WithTimeout(timeout).Should(Equal(int32(2)))

		By("idle past the timeout: both powered down by the operator, the StatefulSet back to no pod")
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Replicas }).WithTimeout(time.Minute).Should(Equal(int32(0)))
		Eventually(hosts).WithTimeout(timeout).Should(Equal(int32(0)))
		Eventually(sinfo).WithTimeout(time.Minute).Should(Equal("worker-0 idle~\nworker-1 idle~"))
		Expect(slurmConf(ctx, ns, "el")).To(ContainSubstring("NodeName=worker-[0-1] "), "the capacity stays in slurm.conf")
	})
})
