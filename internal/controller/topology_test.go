package controller_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

const rackLabel = "topology.example.com/rack"

// labelNode sets a node's rack label.
func labelNode(ctx SpecContext, name, rack string) {
	Eventually(func() error {
		n := &corev1.Node{}
		if err := k8sClient.Get(ctx, key("", name), n); err != nil {
			return err
		}
		n.Labels[rackLabel] = rack
		return k8sClient.Update(ctx, n)
	}).WithTimeout(timeout).Should(Succeed())
}

// topologyConf is the cluster's rendered topology.conf.
func topologyConf(ctx SpecContext, ns, name string) string {
	return get(ctx, &corev1.ConfigMap{}, ns, name+"-slurm-config").Data[slurmconf.TopologyConf]
}

// twoNodeJob submits a two-node job and returns the nodes slurmctld gave it, once it runs.
func twoNodeJob(ctx context.Context, c *slurmharness.Cluster, login string) (string, string) {
	out, err := c.Exec(ctx, login, "sbatch", "--parsable", "-N2", "--wrap", "sleep 300")
	Expect(err).NotTo(HaveOccurred(), out)
	id := strings.TrimSpace(out)
	var nodes string
	Eventually(func(g Gomega) {
		s, err := c.Exec(ctx, login, "squeue", "-h", "-j", id, "-o", "%T %N")
		g.Expect(err).NotTo(HaveOccurred())
		f := strings.Fields(s)
		g.Expect(f).To(HaveLen(2), s)
		g.Expect(f[0]).To(Equal("RUNNING"))
		nodes = f[1]
	}).WithTimeout(timeout).Should(Succeed())
	return id, nodes
}

var _ = Describe("network topology from node labels, on a real slurmctld", func() {
	It("puts workers in the blocks their nodes' labels name, places a two-node job inside one, and follows a relabelled node", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "topo", 4, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmConfig.Topology = &slurmv1alpha1.NetworkTopology{Plugin: slurmv1alpha1.TopologyBlock, BlockLabel: rackLabel}
		})
		By("four nodes in two racks, interleaved, each running one worker")
		nodeNames := make([]string, 4)
		for i := range nodeNames {
			nodeNames[i] = fmt.Sprintf("%s-node-%d", ns, i)
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeNames[i], Labels: map[string]string{rackLabel: []string{"rack-a", "rack-b"}[i%2]}}}
			Expect(k8sClient.Create(ctx, n)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(k8sClient.Delete(ctx, n)).To(Succeed()) })
			setReady(ctx, nodeNames[i], corev1.ConditionTrue)
			workerPodOn(ctx, ns, "topo", i, "rev", true, nodeNames[i])
		}
		Eventually(func() string { return slurmConf(ctx, ns, "topo") }).WithTimeout(timeout).Should(ContainSubstring("TopologyPlugin=topology/block\n"))
		Eventually(func() string { return topologyConf(ctx, ns, "topo") }).WithTimeout(timeout).Should(HaveSuffix(
			"BlockName=rack-a Nodes=worker-[0,2]\nBlockName=rack-b Nodes=worker-[1,3]\nBlockSizes=2,4,8,16,32\n"))

		cluster, _, files := startSlurmFromAPI(ctx, ns, sc, 4)
		hctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		Eventually(func() string {
			s, _ := cluster.Exec(hctx, "topo-login-0", "sinfo", "-h", "-o", "%D %t")
			return s
		}).WithTimeout(timeout).Should(Equal("4 idle\n"))

		By("a two-node job runs inside one rack (without the topology slurmctld picks worker-[0-1])")
		id, nodes := twoNodeJob(hctx, cluster, "topo-login-0")
		Expect(nodes).To(BeElementOf("worker-[0,2]", "worker-[1,3]"))
		_, err := cluster.Exec(hctx, "topo-login-0", "scancel", id)
		Expect(err).NotTo(HaveOccurred())

		By("node-0 relabelled rack-b and node-1 rack-a: the blocks follow, and so does slurmctld")
		labelNode(ctx, nodeNames[0], "rack-b")
		labelNode(ctx, nodeNames[1], "rack-a")
		Eventually(func() string { return topologyConf(ctx, ns, "topo") }).WithTimeout(timeout).Should(HaveSuffix(
			"BlockName=rack-a Nodes=worker-[1-2]\nBlockName=rack-b Nodes=worker-[0,3]\nBlockSizes=2,4,8,16,32\n"))
		Expect(cluster.UpdateSlurmFiles(files())).To(Succeed())
		Eventually(func() string {
			s, _ := cluster.Exec(hctx, "topo-login-0", "scontrol", "show", "topology")
			return s
		}).WithTimeout(timeout).Should(MatchRegexp(`BlockName=rack-a .*Nodes=worker-\[1-2\]`))
		// The cancelled job's nodes finish completing first (up to KillWait on a loaded machine).
		Eventually(func() string {
			s, _ := cluster.Exec(hctx, "topo-login-0", "sinfo", "-h", "-o", "%D %t")
			return s
		}).WithTimeout(2 * time.Minute).Should(Equal("4 idle\n"))
		_, nodes = twoNodeJob(hctx, cluster, "topo-login-0")
		Expect(nodes).To(BeElementOf("worker-[1-2]", "worker-[0,3]"), "neither is what slurmctld picks without the topology, nor a block before the relabel")
	})
})

var _ = Describe("Slurm features from node labels", func() {
	It("gives each worker the values of its node's named labels, and follows a relabelled node", func(ctx SpecContext) {
		ns, _ := minimalCluster(ctx, "feat", 3, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.FeaturesFromNodeLabels = []string{rackLabel}
		})
		nodeNames := make([]string, 2)
		for i := range nodeNames {
			nodeNames[i] = fmt.Sprintf("%s-node-%d", ns, i)
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeNames[i], Labels: map[string]string{rackLabel: []string{"rack-a", "rack-b"}[i]}}}
			Expect(k8sClient.Create(ctx, n)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(k8sClient.Delete(ctx, n)).To(Succeed()) })
			setReady(ctx, nodeNames[i], corev1.ConditionTrue)
			workerPodOn(ctx, ns, "feat", i, "rev", true, nodeNames[i])
		}
		By("worker-2 has no pod on a node: the set's features alone")
		Eventually(func() string { return slurmConf(ctx, ns, "feat") }).WithTimeout(timeout).Should(And(
			MatchRegexp(`NodeName=worker-0 NodeAddr=feat-worker-0 NodeHostname=feat-worker-0 .*Features=worker,rack-a State=UNKNOWN\n`),
			MatchRegexp(`NodeName=worker-1 NodeAddr=feat-worker-1 NodeHostname=feat-worker-1 .*Features=worker,rack-b State=UNKNOWN\n`),
			MatchRegexp(`NodeName=worker-2 NodeAddr=feat-worker-2 NodeHostname=feat-worker-2 .*Features=worker State=UNKNOWN\n`),
			ContainSubstring("PartitionName=main Nodes=worker-[0-2] "),
		))
		By("worker-1's node moves to rack-a: the two share a line")
		labelNode(ctx, nodeNames[1], "rack-a")
		Eventually(func() string { return slurmConf(ctx, ns, "feat") }).WithTimeout(timeout).Should(
			MatchRegexp(`NodeName=worker-\[0-1\] NodeAddr=feat-worker-\[0-1\] NodeHostname=feat-worker-\[0-1\] .*Features=worker,rack-a State=UNKNOWN\n`))
	})
})
