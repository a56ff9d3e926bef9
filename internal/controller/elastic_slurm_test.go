package controller_test

import (
	"context"
	"fmt"
	"slices"
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

		cluster, _, _ := startSlurmWithHosts(ctx, ns, sc, 0, nil)
		hctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
		defer cancel()

		kubelet := startHostsKubelet(hctx, cluster, sc)
		hosts := kubelet.hosts
		sinfo := func() string {
			out, _ := cluster.Exec(hctx, "el-login-0", "sh", "-c", "sinfo -N -h -o '%N %t' | sort -u")
			return strings.TrimSpace(out)
		}
		Eventually(sinfo).WithTimeout(timeout).Should(Equal("worker-0 idle~\nworker-1 idle~"))
		Consistently(hosts).WithTimeout(3 * time.Second).Should(Equal(int32(0)))

		By("a two-node job: Slurm powers both nodes up, the operator makes both pods, the job runs on them")
		job := sbatch(hctx, cluster, "el-login-0", "-N2", "--wrap", "srun hostname")
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Replicas }).WithTimeout(timeout).Should(Equal(int32(2)))
		Eventually(showJob(hctx, cluster, "el-login-0", job)).WithTimeout(2 * time.Minute).Should(And(ContainSubstring("JobState=COMPLETED"), ContainSubstring("NodeList=worker-[0-1]")))
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
		kubelet.setCannotPlace(true)
		stuck := sbatch(hctx, cluster, "el-login-0", "-N1", "--wrap", "true")
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
		const jobWhy = "AdminComment=slurm-operator: waits for the pod of worker-0: Unschedulable: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
		Eventually(showJob(hctx, cluster, "el-login-0", stuck)).WithTimeout(timeout).Should(And(ContainSubstring(jobWhy), ContainSubstring("JobState=CONFIGURING")),
			"the job itself says why it waits")
		failures := func() float64 {
			v, _ := metricValue("slurm_operator_elastic_resume_failures_total", map[string]string{"namespace": ns, "slurmcluster": "el", "set": "worker"})
			return v
		}
		Eventually(failures).WithTimeout(2 * time.Minute).Should(Equal(1.0))
		Eventually(func() float64 { return power("resume_failed") }).WithTimeout(timeout).Should(Equal(1.0))
		Expect(showNode("worker-0")()).To(And(ContainSubstring("DOWN"), ContainSubstring("Reason=ResumeTimeout reached"), ContainSubstring(why)),
			"the node waits for an admin, and still says why its pod never came")
		Expect(showJob(hctx, cluster, "el-login-0", stuck)()).To(And(ContainSubstring("JobState=PENDING"), ContainSubstring(jobWhy)),
			"the job is requeued, not lost, and still says what it waited for")
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Replicas }).WithTimeout(timeout).Should(Equal(int32(0)))
		Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "el-worker-0"}})).To(Succeed()) // as the StatefulSet would

		kubelet.setCannotPlace(false) // room for the next pod
		next := sbatch(hctx, cluster, "el-login-0", "-N1", "--wrap", "srun hostname")
		Eventually(showJob(hctx, cluster, "el-login-0", next)).WithTimeout(2 * time.Minute).Should(And(ContainSubstring("JobState=COMPLETED"), ContainSubstring("NodeList=worker-1")))
		Eventually(waits).WithTimeout(timeout).Should(Equal(2.0), "the second job's wait is in; the failed power-up adds none")

		By("the node back in service, by an admin's resume or by its own registration: its comment goes")
		// While worker-1 is up, worker-0 is the hole below it: the operator asks it up and its pod
		// starts, and its slurmd's registration returns it to service (ReturnToService=2).
		// Otherwise it waits, down, for the admin.
		_, _ = cluster.Exec(hctx, "el-login-0", "scancel", stuck)
		if strings.Contains(showNode("worker-0")(), "State=DOWN") {
			_, _ = cluster.Exec(hctx, "el-login-0", "scontrol", "update", "nodename=worker-0", "state=resume") // refused if it has just returned
		}
		Eventually(showNode("worker-0")).WithTimeout(timeout).ShouldNot(Or(ContainSubstring("pod cannot start"), ContainSubstring("State=DOWN")))
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "el-worker").Spec.Replicas }).WithTimeout(time.Minute).Should(Equal(int32(0)))
	})
})

// Autoscaling turned off and on again on a running set: the nodes leave and rejoin power saving
// through slurmctld's reconfigure, with the pods the spec asks for.
var _ = Describe("an elastic worker set turned fixed and elastic again, against a real Slurm cluster", func() {
	It("gives the fixed set a pod per node that Slurm takes as up, then powers the idle nodes down when autoscaling returns", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "tg", 2, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.GPU = ptr.To[int32](0)
			sc.Spec.SlurmNodes.Worker.Autoscaling = &slurmv1alpha1.Autoscaling{Enabled: true, MaxSize: 2, IdleTimeoutSeconds: 20, ResumeTimeoutSeconds: 60}
		})
		Eventually(func() string { return slurmConf(ctx, ns, "tg") }).WithTimeout(timeout).Should(ContainSubstring("State=CLOUD"))
		cluster, _, files := startSlurmWithHosts(ctx, ns, sc, 0, nil)
		hctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		kubelet := startHostsKubelet(hctx, cluster, sc)
		sinfo := func() string {
			out, _ := cluster.Exec(hctx, "tg-login-0", "sh", "-c", "sinfo -N -h -o '%N %t' | sort -u")
			return strings.TrimSpace(out)
		}
		replicas := func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "tg-worker").Spec.Replicas }
		Eventually(sinfo).WithTimeout(timeout).Should(Equal("worker-0 idle~\nworker-1 idle~"))

		By("autoscaling off: no power saving in slurm.conf, a pod per node, both nodes up and running jobs")
		updateSpec(ctx, ns, "tg", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Autoscaling.Enabled = false })
		Eventually(func() string { return slurmConf(ctx, ns, "tg") }).WithTimeout(timeout).ShouldNot(Or(ContainSubstring("State=CLOUD"), ContainSubstring("ResumeProgram")))
		Eventually(replicas).WithTimeout(timeout).Should(Equal(int32(2)))
		Expect(cluster.UpdateSlurmFiles(files())).To(Succeed()) // the new config lands; the sidecar reconfigures
		Eventually(kubelet.hosts).WithTimeout(timeout).Should(Equal(int32(2)))
		Eventually(sinfo).WithTimeout(2 * time.Minute).Should(Equal("worker-0 idle\nworker-1 idle"))
		out, err := cluster.Exec(hctx, "tg-login-0", "srun", "-N2", "hostname")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(And(ContainSubstring("tg-worker-0"), ContainSubstring("tg-worker-1")))

		By("a pod-cannot-start comment left from the elastic set goes from the fixed set's node; an admin's comment stays")
		for node, comment := range map[string]string{"worker-0": "admin: new fan", "worker-1": "slurm-operator: pod cannot start: Unschedulable: left from the elastic set"} {
			out, err := cluster.Exec(hctx, "tg-login-0", "scontrol", "update", "nodename="+node, "comment="+comment)
			Expect(err).NotTo(HaveOccurred(), out)
		}
		comments := func() string {
			out, _ := cluster.Exec(hctx, "tg-login-0", "sinfo", "-h", "-N", "-O", "NodeList:10,Comment:80")
			return out
		}
		Eventually(comments).WithTimeout(time.Minute).Should(And(ContainSubstring("admin: new fan"), Not(ContainSubstring("pod cannot start"))))
		out, err = cluster.Exec(hctx, "tg-login-0", "scontrol", "update", "nodename=worker-0", "comment=")
		Expect(err).NotTo(HaveOccurred(), out)

		By("autoscaling on again: the nodes are Slurm's to power, and once idle past the timeout both go with their pods")
		updateSpec(ctx, ns, "tg", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Autoscaling.Enabled = true })
		Eventually(func() string { return slurmConf(ctx, ns, "tg") }).WithTimeout(timeout).Should(ContainSubstring("State=CLOUD"))
		Expect(cluster.UpdateSlurmFiles(files())).To(Succeed())
		Eventually(replicas).WithTimeout(2 * time.Minute).Should(Equal(int32(0)))
		Eventually(kubelet.hosts).WithTimeout(timeout).Should(Equal(int32(0)))
		Eventually(sinfo).WithTimeout(time.Minute).Should(Equal("worker-0 idle~\nworker-1 idle~"))

		By("and a job from zero still runs")
		job := sbatch(hctx, cluster, "tg-login-0", "-N2", "--wrap", "srun hostname")
		Eventually(showJob(hctx, cluster, "tg-login-0", job)).WithTimeout(2 * time.Minute).Should(ContainSubstring("JobState=COMPLETED"))
	})
})

// sbatch submits a batch job from a login host and returns its ID.
func sbatch(ctx context.Context, c *slurmharness.Cluster, login string, args ...string) string {
	out, err := c.Exec(ctx, login, append([]string{"sbatch", "--parsable"}, args...)...)
	Expect(err).NotTo(HaveOccurred(), out)
	return strings.TrimSpace(out)
}

// showJob is what `scontrol show job` says of a job, asked from a login host when called.
func showJob(ctx context.Context, c *slurmharness.Cluster, login, job string) func() string {
	return func() string {
		out, _ := c.Exec(ctx, login, "scontrol", "show", "job", job)
		return out
	}
}

// hostsKubelet plays the kubelet for a cluster's default worker set: a worker host for each
// replica of its StatefulSet, started with the slurmd script its pod template runs (the
// elastic one when the template has it), and stopped above the replicas.
type hostsKubelet struct {
	mu          sync.Mutex
	running     int32
	started     map[int32]bool
	cannotPlace bool // new pods count as running but no slurmd starts (a pod never placed)
	err         error
}

func startHostsKubelet(ctx context.Context, cluster *slurmharness.Cluster, sc *slurmv1alpha1.SlurmCluster) *hostsKubelet {
	k := &hostsKubelet{started: map[int32]bool{}}
	ns, name, env := sc.Namespace, sc.Name, []string{"SLURM_CONF_SERVER=" + worker.ConfServer(sc)}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for kctx.Err() == nil {
			want, script := int32(0), ""
			set := &appsv1.StatefulSet{}
			if err := k8sClient.Get(kctx, key(ns, name+"-worker"), set); err == nil && set.Spec.Replicas != nil {
				want = *set.Spec.Replicas
				if slices.Contains(set.Spec.Template.Spec.Containers[0].Command, worker.ElasticWorkerScript) {
					script = worker.ElasticSlurmdScript
				}
			}
			k.mu.Lock()
			for k.running < want && k.err == nil {
				if !k.cannotPlace {
					k.err = cluster.AddWorker(kctx, slurmharness.Host{Name: fmt.Sprintf("%s-worker-%d", name, k.running), SlurmName: fmt.Sprintf("worker-%d", k.running),
						SlurmdScript: script, SlurmdEnv: env})
					k.started[k.running] = true
				}
				k.running++
			}
			for k.running > want && k.err == nil {
				k.running--
				if k.started[k.running] {
					k.err = cluster.StopWorker(kctx, fmt.Sprintf("%s-worker-%d", name, k.running))
					delete(k.started, k.running)
				}
			}
			k.mu.Unlock()
			select {
			case <-kctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	DeferCleanup(func() { stop(); <-done })
	return k
}

// hosts is the number of pods the kubelet runs (started or never placed).
func (k *hostsKubelet) hosts() int32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	Expect(k.err).NotTo(HaveOccurred())
	return k.running
}

func (k *hostsKubelet) setCannotPlace(v bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cannotPlace = v
}
