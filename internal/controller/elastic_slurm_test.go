package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// An elastic set run by the operator itself against a real slurmctld started from the
// ConfigMap and Secrets it wrote. The test plays the kubelet: it starts a worker host for each
// replica of the set's StatefulSet and stops the ones above it.
var _ = Describe("an elastic worker set against a real Slurm cluster", func() {
	It("holds no pod at minSize 0, makes both pods of a two-node job, and removes them after the idle timeout", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "el", 0, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.GPU = ptr.To[int32](0)
			sc.Spec.SlurmNodes.Worker.Autoscaling = &slurmv1alpha1.Autoscaling{Enabled: true, MaxSize: 2, IdleTimeoutSeconds: 20, ResumeTimeoutSeconds: 30}
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

		cluster, _, _ := startSlurmWithHosts(ctx, ns, sc, 0, nil)
		hctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
		defer cancel()

		// The kubelet's part: a host per replica, from worker-0 up.
		var mu sync.Mutex
		var running int32
		var kubeletErr error
		// Set, the kubelet "cannot place" new pods: they count as running but no slurmd starts.
		cannotPlace := false
		started := map[int32]bool{}
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
					if !cannotPlace {
						kubeletErr = cluster.AddWorker(kctx, slurmharness.Host{Name: fmt.Sprintf("el-worker-%d", running), SlurmName: fmt.Sprintf("worker-%d", running),
							SlurmdScript: worker.ElasticSlurmdScript, SlurmdEnv: env})
						started[running] = true
					}
					running++
				}
				for running > want && kubeletErr == nil {
					running--
					if started[running] {
						kubeletErr = cluster.StopWorker(kctx, fmt.Sprintf("el-worker-%d", running))
						delete(started, running)
					}
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
		power := func(state string) float64 {
			v, _ := metricValue("slurm_operator_elastic_nodes", map[string]string{"namespace": ns, "slurmcluster": "el", "set": "worker", "power": state})
			return v
		}
		Eventually(func() float64 { return power("up") }).WithTimeout(timeout).Should(Equal(2.0))
		// One job, two nodes: one wait from its submit to both nodes ready.
		waits := func() float64 {
			v, _ := metricValue("slurm_operator_elastic_resume_wait_seconds", map[string]string{"namespace": ns, "slurmcluster": "el", "set": "worker"})
			return v
		}
		Eventually(waits).WithTimeout(timeout).Should(Equal(1.0))
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
		Eventually(func() []float64 {
			return []float64{power("up"), power("powering_up"), power("powered_down"), power("resume_failed")}
		}).
			WithTimeout(timeout).Should(Equal([]float64{0, 0, 2, 0}))
		Expect(waits()).To(Equal(1.0), "no other job asked for a node")

		By("a pod Kubernetes cannot place: Slurm's node says why, the resume times out, Slurm downs the node and requeues the job, the operator counts the failure and removes the pod, the next job goes to another node")
		mu.Lock()
		cannotPlace = true
		mu.Unlock()
		out, err = cluster.Exec(hctx, "el-login-0", "sbatch", "--parsable", "-N1", "--wrap", "true")
		Expect(err).NotTo(HaveOccurred(), out)
		stuck := strings.TrimSpace(out)
		DeferCleanup(func() { _, _ = cluster.Exec(context.Background(), "el-login-0", "scancel", stuck) })
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Replicas }).WithTimeout(timeout).Should(Equal(int32(1)))
		pendingPod(ctx, ns, "el", 0, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
		showNode := func(name string) func() string {
			return func() string {
				out, _ := cluster.Exec(hctx, "el-login-0", "scontrol", "show", "node", name)
				return out
			}
		}
		const why = "Comment=slurm-operator: pod cannot start: Unschedulable: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
		Eventually(showNode("worker-0")).WithTimeout(timeout).Should(And(ContainSubstring(why), ContainSubstring("POWERING_UP")))
		failures := func() float64 {
			v, _ := metricValue("slurm_operator_elastic_resume_failures_total", map[string]string{"namespace": ns, "slurmcluster": "el", "set": "worker"})
			return v
		}
		Eventually(failures).WithTimeout(2 * time.Minute).Should(Equal(1.0))
		Eventually(func() float64 { return power("resume_failed") }).WithTimeout(timeout).Should(Equal(1.0))
		Expect(showNode("worker-0")()).To(And(ContainSubstring("DOWN"), ContainSubstring("Reason=ResumeTimeout reached"), ContainSubstring(why)),
			"the node waits for an admin, and still says why its pod never came")
		Expect(cluster.Exec(hctx, "el-login-0", "scontrol", "show", "job", stuck)).To(ContainSubstring("JobState=PENDING"), "the job is requeued, not lost")
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Replicas }).WithTimeout(timeout).Should(Equal(int32(0)))
		Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "el-worker-0"}})).To(Succeed()) // as the StatefulSet would

		mu.Lock()
		cannotPlace = false // room for the next pod
		mu.Unlock()
		out, err = cluster.Exec(hctx, "el-login-0", "sbatch", "--parsable", "-N1", "--wrap", "srun hostname")
		Expect(err).NotTo(HaveOccurred(), out)
		next := strings.TrimSpace(out)
		Eventually(func() string {
			out, _ := cluster.Exec(hctx, "el-login-0", "scontrol", "show", "job", next)
			return out
		}).WithTimeout(2 * time.Minute).Should(And(ContainSubstring("JobState=COMPLETED"), ContainSubstring("NodeList=worker-1")))
		Eventually(waits).WithTimeout(timeout).Should(Equal(2.0), "the second job's wait is in; the failed power-up adds none")

		By("the admin resumes the node: its comment goes with its pod")
		_, _ = cluster.Exec(hctx, "el-login-0", "scancel", stuck)
		out, err = cluster.Exec(hctx, "el-login-0", "scontrol", "update", "nodename=worker-0", "state=resume")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(showNode("worker-0")).WithTimeout(timeout).ShouldNot(ContainSubstring("pod cannot start"))
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Replicas }).WithTimeout(time.Minute).Should(Equal(int32(0)))
	})
})
