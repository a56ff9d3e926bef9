package controller_test

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// Node sets against a real slurmctld: a set's nodes join their partitions and answer
// --constraint; shrinking and removing a set drains its nodes first and never touches the
// default workers' StatefulSet. The test plays the kubelet, as the scale-down spec does.
var _ = Describe("node sets against a real Slurm cluster", func() {
	It("runs a set's nodes in their partitions, scales and removes the set drain-first, and leaves the other set alone", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "sets", 2, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.GPU = ptr.To[int32](0)
			sc.Spec.SlurmNodes.NodeSets = []slurmv1alpha1.NodeSet{{Name: "cpu", Size: 2, GPU: ptr.To[int32](0), Features: []string{"bigmem"}}}
			sc.Spec.SlurmConfig.Partitions = []slurmv1alpha1.Partition{
				{Name: "all", Default: true},
				{Name: "gpu", NodeSets: []string{"worker"}},
				{Name: "cpu", NodeSets: []string{"cpu"}},
			}
		})

		By("the set gets a StatefulSet of its own, its nodes a line of their own, and the partitions name them")
		Eventually(func() string { return slurmConf(ctx, ns, "sets") }).WithTimeout(timeout).Should(And(
			ContainSubstring("NodeName=cpu-[0-1] NodeAddr=sets-cpu-[0-1] NodeHostname=sets-cpu-[0-1]"),
			ContainSubstring("Features=cpu,bigmem"),
			ContainSubstring("PartitionName=all Nodes=worker-[0-1],cpu-[0-1] Default=YES"),
			ContainSubstring("PartitionName=gpu Nodes=worker-[0-1] "),
			ContainSubstring("PartitionName=cpu Nodes=cpu-[0-1] "),
		))
		set := get(ctx, &appsv1.StatefulSet{}, ns, "sets-cpu")
		Expect(*set.Spec.Replicas).To(Equal(int32(2)))
		Expect(set.Spec.Selector.MatchLabels).To(HaveKeyWithValue(slurmv1alpha1.LabelNodeSet, "cpu"))
		Expect(set.Spec.ServiceName).To(Equal("sets-worker"), "the set's pods are named by the workers' headless Service")
		Expect(set.Spec.Template.Spec.Containers[0].Env).To(ContainElement(HaveField("Value", "cpu-$(POD_INDEX)")))
		workers := get(ctx, &appsv1.StatefulSet{}, ns, "sets-worker")
		Expect(workers.Spec.Selector.MatchLabels).NotTo(HaveKey(slurmv1alpha1.LabelNodeSet), "the default workers' selector is as it was before node sets")

		cpuHosts := []slurmharness.Host{{Name: "sets-cpu-0", SlurmName: "cpu-0"}, {Name: "sets-cpu-1", SlurmName: "cpu-1"}}
		cluster, client, files := startSlurmWithHosts(ctx, ns, sc, 2, cpuHosts)
		hctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()

		By("Slurm sees both sets in their partitions, and --constraint picks the set")
		Eventually(func() string {
			out, _ := cluster.Exec(hctx, "sets-login-0", "sinfo", "-h", "-p", "cpu", "-N", "-o", "%N %f")
			return out
		}).WithTimeout(timeout).Should(And(ContainSubstring("cpu-0 cpu,bigmem"), ContainSubstring("cpu-1 cpu,bigmem")))
		out, err := cluster.Exec(hctx, "sets-login-0", "srun", "--constraint=bigmem", "-N", "2", "hostname")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(strings.Fields(out)).To(ConsistOf("sets-cpu-0", "sets-cpu-1"))
		out, err = cluster.Exec(hctx, "sets-login-0", "srun", "-p", "gpu", "-N", "2", "hostname")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(strings.Fields(out)).To(ConsistOf("sets-worker-0", "sets-worker-1"), "partition gpu holds the default set only")

		By("shrinking the set drains cpu-1 and keeps its pod while its job runs; the default workers are untouched")
		job := sbatchOn(hctx, cluster, "sets-login-0", "cpu-1", 12)
		workersBefore := get(ctx, &appsv1.StatefulSet{}, ns, "sets-worker")
		updateSpec(ctx, ns, "sets", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.NodeSets[0].Size = 1 })
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "cpu-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeTrue())
			g.Expect(n.Reason).To(Equal(slurmfacts.DrainScaleDown))
		}).WithTimeout(timeout).Should(Succeed())
		eventuallyCondition(ctx, ns, "sets", "ScalingDown", "WaitingForJobs", "cpu-1")
		Consistently(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "sets-cpu").Spec.Replicas }).WithTimeout(4 * time.Second).Should(Equal(int32(2)))
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "sets-cpu").Spec.Replicas }).WithTimeout(60 * time.Second).Should(Equal(int32(1)))
		Eventually(func() string { return slurmConf(ctx, ns, "sets") }).WithTimeout(timeout).Should(ContainSubstring("NodeName=cpu-0 "))
		out, err = cluster.Exec(hctx, "sets-login-0", "scontrol", "show", "job", job)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("JobState=COMPLETED"), "the job on the removed node did not complete")
		Expect(get(ctx, &appsv1.StatefulSet{}, ns, "sets-worker").Generation).To(Equal(workersBefore.Generation), "the default workers' StatefulSet changed")
		Expect(cluster.StopWorker(hctx, "sets-cpu-1")).To(Succeed())
		Expect(cluster.UpdateSlurmFiles(files())).To(Succeed())

		By("a set a partition names cannot be removed")
		cur := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, key(ns, "sets"), cur)).To(Succeed())
		cur.Spec.SlurmNodes.NodeSets = nil
		err = k8sClient.Update(ctx, cur)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("must name worker or an entry of spec.slurmNodes.nodeSets"))

		By("removing the set and its partition drains cpu-0 first: its StatefulSet and node line stay while its job runs")
		Eventually(func() string {
			out, _ := cluster.Exec(hctx, "sets-login-0", "sinfo", "-h", "-n", "cpu-0", "-o", "%T")
			return strings.TrimSpace(out)
		}).WithTimeout(timeout).Should(Equal("idle"))
		job = sbatchOn(hctx, cluster, "sets-login-0", "cpu-0", 12)
		updateSpec(ctx, ns, "sets", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.NodeSets = nil
			sc.Spec.SlurmConfig.Partitions = sc.Spec.SlurmConfig.Partitions[:2]
		})
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "cpu-0")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Reason).To(Equal(slurmfacts.DrainScaleDown))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(slurmConf(ctx, ns, "sets")).To(ContainSubstring("NodeName=cpu-0 "), "the leaving set's node must stay in slurm.conf while its job runs")
		Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "sets-cpu").Spec.Replicas).To(Equal(int32(1)))
		Eventually(func() bool {
			err := k8sClient.Get(ctx, key(ns, "sets-cpu"), &appsv1.StatefulSet{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(90*time.Second).Should(BeTrue(), "the drained set's StatefulSet is removed once its job ended")
		Expect(slurmConf(ctx, ns, "sets")).NotTo(ContainSubstring("cpu-"))
		out, err = cluster.Exec(hctx, "sets-login-0", "scontrol", "show", "job", job)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("JobState=COMPLETED"), "the job on the removed set did not complete")
		Expect(get(ctx, &appsv1.StatefulSet{}, ns, "sets-worker").Generation).To(Equal(workersBefore.Generation), "the default workers' StatefulSet changed")
	})
})

// setPod is workerPod for a node set's pod: <cluster>-<set>-i, with the set's label.
func setPod(ctx SpecContext, ns, cluster, set string, i int, revision string, ready bool) {
	setPodOn(ctx, ns, cluster, set, i, revision, ready, "")
}

// publishSetRevision publishes a worker StatefulSet's revisions, as its controller would.
func publishSetRevision(ctx SpecContext, ns, name string, replicas int32, current, update string) {
	Eventually(func() error {
		s := &appsv1.StatefulSet{}
		if err := k8sClient.Get(ctx, key(ns, name), s); err != nil {
			return err
		}
		s.Status.Replicas, s.Status.ObservedGeneration = replicas, s.Generation
		s.Status.CurrentRevision, s.Status.UpdateRevision = current, update
		return k8sClient.Status().Update(ctx, s)
	}).WithTimeout(timeout).Should(Succeed())
}

var _ = Describe("one set rolling while another scales down, against a real Slurm cluster", func() {
	It("replaces the rolling set's pods drain-first and shrinks the other set drain-first, each on its own", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "both", 2, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.GPU = ptr.To[int32](0)
			sc.Spec.SlurmNodes.NodeSets = []slurmv1alpha1.NodeSet{{Name: "cpu", Size: 2, GPU: ptr.To[int32](0)}}
		})
		cpuHosts := []slurmharness.Host{{Name: "both-cpu-0", SlurmName: "cpu-0"}, {Name: "both-cpu-1", SlurmName: "cpu-1"}}
		cluster, client, _ := startSlurmWithHosts(ctx, ns, sc, 2, cpuHosts)
		hctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		Eventually(func() string {
			out, _ := cluster.Exec(hctx, "both-login-0", "sinfo", "-h", "-N", "-o", "%N %t")
			return out
		}).WithTimeout(timeout).Should(And(ContainSubstring("cpu-1 idle"), ContainSubstring("worker-1 idle")))

		By("the cpu set's pods run an old template while worker-1 and cpu-1 run jobs; the workers shrink to 1")
		cpuJob := sbatchOn(hctx, cluster, "both-login-0", "cpu-1", 40)
		workerJob := sbatchOn(hctx, cluster, "both-login-0", "worker-1", 12)
		workerPod(ctx, ns, "both", 0, "w", true)
		workerPod(ctx, ns, "both", 1, "w", true)
		publishRevision(ctx, ns, "both", 2, "w", "w")
		setPod(ctx, ns, "both", "cpu", 0, "old", true)
		setPod(ctx, ns, "both", "cpu", 1, "old", true)
		publishSetRevision(ctx, ns, "both-cpu", 2, "old", "new")
		updateSpec(ctx, ns, "both", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 1 })

		By("the idle cpu-0 is replaced for its update; once its new pod is ready, cpu-1 is drained for it and kept; worker-1 is drained for the scale-down")
		Eventually(podGone(ctx, ns, "both-cpu-0")).WithTimeout(timeout).Should(BeTrue())
		setPod(ctx, ns, "both", "cpu", 0, "new", true)
		Eventually(func(g Gomega) {
			c1, err := client.Node(ctx, "cpu-1")
			g.Expect(err).NotTo(HaveOccurred())
			w1, err := client.Node(ctx, "worker-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c1.Reason).To(Equal(slurmfacts.DrainUpdate))
			g.Expect(w1.Reason).To(Equal(slurmfacts.DrainScaleDown))
		}).WithTimeout(timeout).Should(Succeed())
		Expect(podGone(ctx, ns, "both-cpu-1")()).To(BeFalse(), "cpu-1 runs a job and must wait")
		Expect(podGone(ctx, ns, "both-worker-0")()).To(BeFalse(), "the default workers are not rolling")
		Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "both-cpu").Spec.Replicas).To(Equal(int32(2)), "the rolling set keeps its size")

		By("the jobs end: the workers shrink, cpu-1's pod is replaced, and both jobs completed")
		Eventually(func() int32 { return *get(ctx, &appsv1.StatefulSet{}, ns, "both-worker").Spec.Replicas }).WithTimeout(60 * time.Second).Should(Equal(int32(1)))
		Eventually(podGone(ctx, ns, "both-cpu-1")).WithTimeout(60 * time.Second).Should(BeTrue())
		for _, job := range []string{cpuJob, workerJob} {
			out, err := cluster.Exec(hctx, "both-login-0", "scontrol", "show", "job", job)
			Expect(err).NotTo(HaveOccurred())
			Expect(out).To(ContainSubstring("JobState=COMPLETED"))
		}
		Expect(*get(ctx, &appsv1.StatefulSet{}, ns, "both-cpu").Spec.Replicas).To(Equal(int32(2)))
	})
})

var _ = Describe("a node set whose filter matches no node", func() {
	It("says which of its pods cannot start, by Slurm name, and leaves the workers and the set's node line alone", func(ctx SpecContext) {
		ns, _ := minimalCluster(ctx, "lone", 1, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.K8sNodeFilters = append(sc.Spec.K8sNodeFilters, slurmv1alpha1.K8sNodeFilter{Name: "nowhere", NodeSelector: map[string]slurmv1alpha1.LabelValue{"pool": "none"}})
			sc.Spec.SlurmNodes.Worker.GPU = ptr.To[int32](0)
			sc.Spec.SlurmNodes.NodeSets = []slurmv1alpha1.NodeSet{{Name: "cpu", Size: 1, K8sNodeFilterName: "nowhere", GPU: ptr.To[int32](0)}}
		})
		Eventually(func() map[string]string {
			s := &appsv1.StatefulSet{}
			if err := k8sClient.Get(ctx, key(ns, "lone-cpu"), s); err != nil {
				return nil
			}
			return s.Spec.Template.Spec.NodeSelector
		}).WithTimeout(timeout).Should(HaveKeyWithValue("pool", "none"))
		workersBefore := get(ctx, &appsv1.StatefulSet{}, ns, "lone-worker")

		why := "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
		pendingSetPod(ctx, ns, "lone", "cpu", 0, why)
		eventuallyCondition(ctx, ns, "lone", "WorkersAvailable", "WorkerPodsPending",
			"pod lone-cpu-0 (Slurm node cpu-0) cannot start: Unschedulable: "+why)
		Expect(slurmConf(ctx, ns, "lone")).To(And(ContainSubstring("NodeName=worker-0 "), ContainSubstring("NodeName=cpu-0 ")))
		Expect(get(ctx, &appsv1.StatefulSet{}, ns, "lone-worker").Generation).To(Equal(workersBefore.Generation), "the default workers' StatefulSet changed")
	})
})
