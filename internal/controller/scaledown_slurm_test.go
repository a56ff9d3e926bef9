package controller_test

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/util/intstr"
	"os"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// This spec joins the two real worlds: the operator reconciles against the API server, and
// talks to a real slurmctld (through slurmrestd) started from the ConfigMap and Secrets it
// wrote. The test plays the kubelet: it copies the ConfigMap into the Slurm hosts and removes a
// worker host when the StatefulSet shrinks.
var _ = Describe("scaling down against a real Slurm cluster", func() {
	It("drains the leaving worker, waits for its job, then shrinks the StatefulSet", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "demo", 4, nil)

		cluster, client, files := startSlurmFromAPI(ctx, ns, sc, 4)
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()

		By("running a job on worker-3, then asking for 3 workers")
		job := sbatchOn(hctx, cluster, "demo-login-0", "worker-3", 12)
		updateSpec(ctx, ns, "demo", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 3 })

		By("the operator drains worker-3 with its own reason and keeps the pod while the job runs")
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-3")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeTrue())
			g.Expect(n.Reason).To(Equal(slurmfacts.DrainScaleDown))
		}).WithTimeout(timeout).Should(Succeed())
		eventuallyCondition(ctx, ns, "demo", "ScalingDown", "WaitingForJobs", "worker-3")
		Consistently(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "demo-worker").Spec.Replicas
		}).WithTimeout(4 * time.Second).Should(Equal(int32(4)))
		Expect(slurmConf(ctx, ns, "demo")).To(ContainSubstring("worker-[0-3]"))

		By("once the job ends, the StatefulSet and the node list shrink")
		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "demo-worker").Spec.Replicas
		}).WithTimeout(60 * time.Second).Should(Equal(int32(3)))
		Eventually(func() string { return slurmConf(ctx, ns, "demo") }).WithTimeout(timeout).Should(ContainSubstring("NodeName=worker-[0-2]"))
		// This cluster has no accounting; slurmctld keeps finished jobs for MinJobAge (300 s).
		out, err := cluster.Exec(hctx, "demo-login-0", "scontrol", "show", "job", job)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("JobState=COMPLETED"), "the job on the removed worker did not complete")

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

// startSlurmFromAPI starts Slurm hosts (controller, workers, a login host) from the ConfigMap
// and Secrets the operator wrote for sc, with slurmrestd and the reconfigure sidecar, and routes
// the operator's Slurm client for the namespace to it. files re-reads the ConfigMap.
func startSlurmFromAPI(ctx SpecContext, ns string, sc *slurmv1alpha1.SlurmCluster, workers int) (*slurmharness.Cluster, *slurm.Client, func() map[string][]byte) {
	return startSlurmWithHosts(ctx, ns, sc, workers, nil)
}

// startSlurmWithHosts is startSlurmFromAPI with further worker hosts (a node set's).
func startSlurmWithHosts(ctx SpecContext, ns string, sc *slurmv1alpha1.SlurmCluster, workers int, more []slurmharness.Host) (*slurmharness.Cluster, *slurm.Client, func() map[string][]byte) {
	root := os.Getenv("SLURM_ROOTFS")
	if root == "" {
		Skip("SLURM_ROOTFS is not set: run 'make test'")
	}
	files := func() map[string][]byte {
		cm := get(ctx, &corev1.ConfigMap{}, ns, sc.ConfigMapName())
		out := map[string][]byte{}
		for k, v := range cm.Data {
			out[k] = []byte(v)
		}
		return out
	}
	want := "NodeName=worker-" // an elastic set's nodes with no pod (workers 0)
	if workers > 0 {
		want = fmt.Sprintf("NodeName=worker-[0-%d]", workers-1)
	}
	Eventually(func() string { return slurmConf(ctx, ns, sc.Name) }).WithTimeout(timeout).Should(ContainSubstring(want))
	munge := get(ctx, &corev1.Secret{}, ns, sc.MungeKeySecretName()).Data["munge.key"]
	jwt := get(ctx, &corev1.Secret{}, ns, sc.JWTKeySecretName()).Data["jwt_hs256.key"]
	var hosts []slurmharness.Host
	for i := 0; i < workers; i++ {
		hosts = append(hosts, slurmharness.Host{Name: sc.PodName(slurmv1alpha1.ComponentWorker, int32(i)), SlurmName: slurmv1alpha1.SlurmNodeName(slurmv1alpha1.ComponentWorker, int32(i))})
	}
	hosts = append(hosts, more...)
	hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctl := slurmconf.ControllerHost(sc, 0)
	cluster, err := slurmharness.Start(hctx, slurmharness.Config{
		RootFS: root, SlurmFiles: files(), MungeKey: munge, JWTKey: jwt,
		Controller: slurmharness.Host{Name: ctl},
		Workers:    hosts,
		Logins:     []slurmharness.Host{{Name: sc.Name + "-login-0"}},
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Println(cluster.Logs(ctl))
		}
		Expect(cluster.Stop()).To(Succeed())
	})
	client, err := slurmtest.StartRestd(hctx, cluster, ctl, sc, jwt)
	Expect(err).NotTo(HaveOccurred(), cluster.Logs(ctl))
	Expect(slurmtest.StartReconfigureSidecar(hctx, cluster, ctl)).To(Succeed())
	slurmClients.Store(ns, client)
	DeferCleanup(func() { slurmClients.Delete(ns) })
	return cluster, client, files
}

// sbatchOn submits a sleeping job pinned to a node and waits until it runs; it returns its ID.
func sbatchOn(ctx context.Context, c *slurmharness.Cluster, login, node string, seconds int) string {
	out, err := c.Exec(ctx, login, "sbatch", "-w", node, "--wrap", fmt.Sprintf("sleep %d", seconds))
	Expect(err).NotTo(HaveOccurred())
	job := regexp.MustCompile(`\d+`).FindString(out)
	Eventually(func() string {
		s, _ := c.Exec(ctx, login, "squeue", "-h", "-j", job, "-o", "%T")
		return strings.TrimSpace(s)
	}).WithTimeout(timeout).Should(Equal("RUNNING"))
	return job
}

var _ = Describe("updating worker pods against a real Slurm cluster", func() {
	It("replaces an outdated pod only once its node is drained, idle nodes first, and returns it to service", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "upd", 2, nil)
		cluster, client, _ := startSlurmFromAPI(ctx, ns, sc, 2)
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()

		// Long enough to outlast worker-0's replacement on a busy machine.
		job := sbatchOn(hctx, cluster, "upd-login-0", "worker-1", 30)
		workerPod(ctx, ns, "upd", 0, "old", true)
		workerPod(ctx, ns, "upd", 1, "old", true)
		publishRevision(ctx, ns, "upd", 2, "old", "new")

		By("the idle worker-0 goes first: drained for the update, its pod replaced")
		Eventually(podGone(ctx, ns, "upd-worker-0")).WithTimeout(timeout).Should(BeTrue())
		n0, err := client.Node(ctx, "worker-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(n0.Reason).To(Equal(slurmfacts.DrainUpdate))
		Expect(podGone(ctx, ns, "upd-worker-1")()).To(BeFalse(), "worker-1 runs a job and must wait")

		By("the new worker-0 pod is ready: worker-0 returns to service, worker-1 is drained next")
		workerPod(ctx, ns, "upd", 0, "new", true)
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-0")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeFalse())
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Reason).To(Equal(slurmfacts.DrainUpdate))
		}).WithTimeout(timeout).Should(Succeed())
		Consistently(podGone(ctx, ns, "upd-worker-1")).WithTimeout(3 * time.Second).Should(BeFalse())

		By("its job ends: worker-1's pod is replaced, and the job completed")
		Eventually(podGone(ctx, ns, "upd-worker-1")).WithTimeout(60 * time.Second).Should(BeTrue())
		out, err := cluster.Exec(hctx, "upd-login-0", "scontrol", "show", "job", job)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("JobState=COMPLETED"))
		workerPod(ctx, ns, "upd", 1, "new", true)
		publishRevision(ctx, ns, "upd", 2, "new", "new")
		Eventually(func(g Gomega) {
			cur := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "upd"), cur)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, "WorkersUpdating")).To(BeTrue())
			n, err := client.Node(ctx, "worker-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeFalse())
		}).WithTimeout(timeout).Should(Succeed())
	})
})

var _ = Describe("the pace of a worker update against a real Slurm cluster", func() {
	It("replaces updateStrategy.maxUnavailable idle workers at once, and no more", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "pace", 3, func(sc *slurmv1alpha1.SlurmCluster) {
			two := intstr.FromInt32(2)
			sc.Spec.SlurmNodes.Worker.UpdateStrategy.MaxUnavailable = &two
		})
		startSlurmFromAPI(ctx, ns, sc, 3)
		for i := range 3 {
			workerPod(ctx, ns, "pace", i, "old", true)
		}
		publishRevision(ctx, ns, "pace", 3, "old", "new")

		By("the two highest ordinals go together; worker-0 waits while their new pods are made and start")
		for _, i := range []int{2, 1} {
			Eventually(podGone(ctx, ns, fmt.Sprintf("pace-worker-%d", i))).WithTimeout(timeout).Should(BeTrue())
		}
		eventuallyCondition(ctx, ns, "pace", "WorkersUpdating", "ReplacingPods", "replacing at most 2 at a time")
		// Before the StatefulSet makes the new pods, the two replacements are in flight all the
		// same (their nodes carry the update drain).
		Consistently(podGone(ctx, ns, "pace-worker-0")).WithTimeout(3 * time.Second).Should(BeFalse())
		// Play the StatefulSet controller: the new pods, not ready yet.
		for _, i := range []int{2, 1} {
			workerPod(ctx, ns, "pace", i, "new", false)
		}
		Consistently(podGone(ctx, ns, "pace-worker-0")).WithTimeout(3 * time.Second).Should(BeFalse())

		By("one new pod is ready: worker-0 goes")
		Eventually(func() error {
			p := get(ctx, &corev1.Pod{}, ns, "pace-worker-2")
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
			return k8sClient.Status().Update(ctx, p)
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(podGone(ctx, ns, "pace-worker-0")).WithTimeout(timeout).Should(BeTrue())
	})
})

var _ = Describe("a scale-down with a grace period against a real Slurm cluster", func() {
	It("removes a worker whose job outlives spec.slurmNodes.worker.scaleDownGracePeriodSeconds", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "grace", 2, func(sc *slurmv1alpha1.SlurmCluster) {
			grace := int32(5)
			sc.Spec.SlurmNodes.Worker.ScaleDownGracePeriodSeconds = &grace
		})
		cluster, client, _ := startSlurmFromAPI(ctx, ns, sc, 2)
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()

		sbatchOn(hctx, cluster, "grace-login-0", "worker-1", 300)
		updateSpec(ctx, ns, "grace", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 1 })
		eventuallyCondition(ctx, ns, "grace", "ScalingDown", "WaitingForJobs", "worker-1")
		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "grace-worker").Spec.Replicas
		}).WithTimeout(60 * time.Second).Should(Equal(int32(1)))
		n, err := client.Node(ctx, "worker-1")
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Has("DRAIN")).To(BeTrue(), "the leaving node must stay drained until it is gone")
	})
})

var _ = Describe("busy workers against a real Slurm cluster", func() {
	It("labels the pods of workers that run jobs, and the API server refuses to evict them", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "busy", 2, nil)
		cluster, _, _ := startSlurmFromAPI(ctx, ns, sc, 2)
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		workerPod(ctx, ns, "busy", 0, "rev", true)
		workerPod(ctx, ns, "busy", 1, "rev", true)
		publishRevision(ctx, ns, "busy", 2, "rev", "rev")
		pdb := get(ctx, &policyv1.PodDisruptionBudget{}, ns, "busy-worker-busy")
		Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(0))

		By("running a job on worker-1")
		job := sbatchOn(hctx, cluster, "busy-login-0", "worker-1", 120)
		DeferCleanup(func() { _, _ = cluster.Exec(context.Background(), "busy-login-0", "scancel", job) })
		label := func(name string) func() string {
			return func() string { return get(ctx, &corev1.Pod{}, ns, name).Labels["slurm.hpc.dev/busy"] }
		}
		By("waiting for the busy labels")
		Eventually(label("busy-worker-1")).WithTimeout(timeout).Should(Equal("true"))
		Eventually(label("busy-worker-0")).WithTimeout(timeout).Should(Equal("false"))

		clientset, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		// No retries: client-go would retry a refused eviction (429) for up to ten times its
		// Retry-After, which is what kubectl drain does; one answer is what this test needs.
		evict := func(name string) error {
			return clientset.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(name).
				SubResource("eviction").MaxRetries(0).
				Body(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}).
				Do(ctx).Error()
		}
		By("evicting")
		err = evict("busy-worker-1")
		Expect(err).To(HaveOccurred(), "a worker running a job was evicted")
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), err.Error())
		Expect(evict("busy-worker-0")).To(Succeed(), "an idle worker must stay evictable")
	})
})

// minimalCluster creates the minimal sample as NAME with the given worker count (and edit) in a
// new namespace.
func minimalCluster(ctx SpecContext, name string, workers int32, edit func(*slurmv1alpha1.SlurmCluster)) (string, *slurmv1alpha1.SlurmCluster) {
	ns := newNamespace(ctx)
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_minimal")
	Expect(err).NotTo(HaveOccurred())
	sc.Namespace, sc.Name = ns, name
	sc.Spec.SlurmNodes.Worker.Size = workers
	if edit != nil {
		edit(sc)
	}
	Expect(k8sClient.Create(ctx, sc)).To(Succeed())
	return ns, sc
}

// A worker pod that never ran never registered with slurmctld, so Slurm's answer lacks it. It
// cannot run a job: a scale-down below it must not wait for Slurm to account for it.
var _ = Describe("scaling down past a worker pod that never ran", func() {
	It("removes the Pending worker at once, reports it while it is wanted, and keeps the job on worker-1", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "pend", 3, nil)
		cluster, client, _ := startSlurmFromAPI(ctx, ns, sc, 3)
		hctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		job := sbatchOn(hctx, cluster, "pend-login-0", "worker-1", 30)

		By("size 5: worker-3's and worker-4's pods cannot be placed; the status says so with the scheduler's words, and an event names each pod")
		updateSpec(ctx, ns, "pend", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 5 })
		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "pend-worker").Spec.Replicas
		}).WithTimeout(timeout).Should(Equal(int32(5)))
		pendingPod(ctx, ns, "pend", 3, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
		pendingPod(ctx, ns, "pend", 4, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
		eventuallyCondition(ctx, ns, "pend", "WorkersAvailable", "WorkerPodsPending",
			"pod pend-worker-3 (Slurm node worker-3) cannot start: Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx, list, crclient.InNamespace(ns))).To(Succeed())
			related := map[string]string{}
			for _, e := range list.Items {
				if e.Reason == "WorkerPodPending" && e.Related != nil {
					related[e.Related.Name] = e.Note
				}
			}
			// One each: the events library would fold the second into the first's series.
			g.Expect(related).To(HaveLen(2))
			for _, i := range []string{"3", "4"} {
				g.Expect(related["pend-worker-"+i]).To(HavePrefix("pod pend-worker-" + i + " (Slurm node worker-" + i + ") cannot start"))
			}
		}).WithTimeout(timeout).Should(Succeed())

		By("size 2: worker-2 is drained and removed with worker-3 and worker-4, which Slurm never listed")
		updateSpec(ctx, ns, "pend", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 2 })
		Eventually(func() int32 {
			return *get(ctx, &appsv1.StatefulSet{}, ns, "pend-worker").Spec.Replicas
		}).WithTimeout(timeout).Should(Equal(int32(2)))
		Eventually(func() string { return slurmConf(ctx, ns, "pend") }).WithTimeout(timeout).Should(ContainSubstring("NodeName=worker-[0-1]"))
		n, err := client.Node(ctx, "worker-2")
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Reason).To(Equal(slurmfacts.DrainScaleDown))
		out, err := cluster.Exec(hctx, "pend-login-0", "squeue", "-h", "-j", job, "-o", "%T")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal("RUNNING\n"), "the job on worker-1")
	})
})

// pendingPod plays the scheduler for a worker pod it cannot place.
func pendingPod(ctx SpecContext, ns, cluster string, i int, why string) {
	pendingSetPod(ctx, ns, cluster, slurmv1alpha1.DefaultNodeSet, i, why)
}

// pendingSetPod is pendingPod for a pod of a worker set.
func pendingSetPod(ctx SpecContext, ns, cluster, set string, i int, why string) {
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Name, sc.Namespace = cluster, ns
	labels := base.Labels(sc, slurmv1alpha1.ComponentWorker)
	if set != slurmv1alpha1.DefaultNodeSet {
		labels[slurmv1alpha1.LabelNodeSet] = set
	}
	labels[base.LabelPodIndex] = fmt.Sprint(i)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", cluster, set, i), Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "slurmd", Image: "slurmd"}}},
	}
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	Eventually(func() error {
		if err := k8sClient.Get(ctx, key(ns, p.Name), p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: why, LastTransitionTime: metav1.Now()}}
		return k8sClient.Status().Update(ctx, p)
	}).WithTimeout(timeout).Should(Succeed())
}
