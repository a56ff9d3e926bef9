package slurmconf_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

func TestANodeSetRequestAboveItsLimitIsRefusedWithTheFieldNamed(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_nodesets")
	if err != nil {
		t.Fatal(err)
	}
	if err := slurmconf.CheckNodeSetResources(sc); err != nil {
		t.Fatalf("the sample is refused: %v", err)
	}
	sc.Spec.SlurmNodes.NodeSets[1].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32")}
	err = slurmconf.CheckNodeSetResources(sc)
	if err == nil || !strings.Contains(err.Error(), "spec.slurmNodes.nodeSets[1].resources.requests.cpu: 32 is more than its limit 16") {
		t.Fatalf("want the request above its limit refused, got %v", err)
	}
	sc.Spec.SlurmNodes.NodeSets[1].Resources.Requests = corev1.ResourceList{"rdma/ib": resource.MustParse("1")}
	if err := slurmconf.CheckNodeSetResources(sc); err == nil || !strings.Contains(err.Error(), "nodeSets[1].resources.requests.rdma/ib: an extended resource") {
		t.Fatalf("want an overcommitted extended resource refused, got %v", err)
	}
}

// The health check expects each node's own set's GPUs: the script, run by /bin/sh with the node
// name slurmd gives it, picks 8 for the default workers, 4 for a100-N and 0 for cpu-N.
func TestTheHealthCheckExpectsEachSetsGPUs(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_nodesets")
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.PeriodicChecks = &slurmv1alpha1.PeriodicChecks{Enabled: true}
	script := slurmconf.Files(fixtures.Input(sc))[slurmconf.NodeHealthScript]
	var line string
	for _, l := range strings.Split(script, "\n") {
		if strings.HasPrefix(l, "EXPECTED_GPUS=") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("no EXPECTED_GPUS line in the health check")
	}
	for node, want := range map[string]string{"worker-3": "8", "a100-1": "4", "cpu-0": "0", "a1000-0": "8"} {
		cmd := exec.Command("/bin/sh", "-c", line+"\necho $EXPECTED_GPUS")
		cmd.Env = []string{"SLURMD_NODENAME=" + node}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", line, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("node %s: the health check expects %s GPUs, want %s (%s)", node, got, want, line)
		}
	}
}

// Features from node labels: the workers on nodes with the same label values share a node line
// that carries them; a worker not placed yet has its set's features alone.
func TestFeaturesFromNodeLabelsGroupTheWorkersByTheirNodes(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_nodesets")
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.SlurmNodes.Worker.FeaturesFromNodeLabels = []string{"example.com/rack", "example.com/nic"}
	in := fixtures.Input(sc)
	in.Placements = []base.WorkerPlacement{
		{Name: "worker-0", Node: "n0", Labels: map[string]string{"example.com/rack": "r1", "example.com/nic": "cx7"}},
		{Name: "worker-1", Node: "n1", Labels: map[string]string{"example.com/rack": "r2", "example.com/nic": "cx7"}},
		{Name: "worker-2", Node: "n2", Labels: map[string]string{"example.com/rack": "r1", "example.com/nic": "cx7"}},
		{Name: "a100-0", Node: "n4", Labels: map[string]string{"example.com/rack": "r9"}},
	}
	conf := slurmconf.Files(in)[slurmconf.SlurmBaseConf]
	for _, want := range []string{
		"NodeName=worker-[0,2] NodeAddr=mixed-worker-[0,2] NodeHostname=mixed-worker-[0,2] CPUs=96 RealMemory=1007616 Gres=gpu:8 Features=worker,nvlink,ib,cx7,r1 State=UNKNOWN",
		"NodeName=worker-1 NodeAddr=mixed-worker-1 NodeHostname=mixed-worker-1 CPUs=96 RealMemory=1007616 Gres=gpu:8 Features=worker,nvlink,ib,cx7,r2 State=UNKNOWN",
		"NodeName=worker-3 NodeAddr=mixed-worker-3 NodeHostname=mixed-worker-3 CPUs=96 RealMemory=1007616 Gres=gpu:8 Features=worker,nvlink,ib State=UNKNOWN",
		// The set takes the workers' keys: a100-0 is on rack r9, a100-1 … a100-3 on no node
		// (the elastic set's powered-down nodes have no pod).
		"NodeName=a100-0 NodeAddr=mixed-a100-0 NodeHostname=mixed-a100-0 CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 CoreSpecCount=4 RealMemory=495616 Gres=gpu:4 Features=a100,ib,r9 State=CLOUD",
		"NodeName=a100-[1-3] NodeAddr=mixed-a100-[1-3] NodeHostname=mixed-a100-[1-3] CPUs=128 Sockets=2 CoresPerSocket=32 ThreadsPerCore=2 CoreSpecCount=4 RealMemory=495616 Gres=gpu:4 Features=a100,ib State=CLOUD",
		// Partitions still name every node, whatever lines they are on.
		"PartitionName=gpu Nodes=worker-[0-3],a100-[0-3] Default=YES",
	} {
		if !strings.Contains(conf, want+"\n") && !strings.Contains(conf, want+" ") {
			t.Errorf("slurm.conf lacks %q:\n%s", want, conf)
		}
	}
}

// A CPU-only set beside GPU sets: gres.conf includes each node's own file, so the CPU nodes'
// entrypoint must write one (empty), or slurmd stops on the missing include.
func TestACPUOnlySetBesideGPUSetsWritesAnEmptyNodeGresFile(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_nodesets")
	if err != nil {
		t.Fatal(err)
	}
	in := fixtures.Input(sc)
	if gres := slurmconf.Files(in)[slurmconf.GresConf]; !strings.Contains(gres, "Include "+slurmfacts.NodeGresConf) {
		t.Fatalf("gres.conf does not include the nodes' files:\n%s", gres)
	}
	sets := in.Cluster.WorkerSets()
	if got := strings.Join(slurmconf.WorkerGPUFlags(in, sets[2]), " "); got != "--gres-conf "+slurmfacts.NodeGresConf {
		t.Errorf("the cpu set's entrypoint flags: %q, want the node file only", got)
	}
	if got := strings.Join(slurmconf.WorkerGPUFlags(in, sets[1]), " "); !strings.HasPrefix(got, "--gpus 4 --gres-conf "+slurmfacts.NodeGresConf) {
		t.Errorf("the a100 set's entrypoint flags: %q", got)
	}
	// Without any GPU set, gres.conf includes nothing and no worker writes a file.
	for i := range sc.Spec.SlurmNodes.NodeSets {
		sc.Spec.SlurmNodes.NodeSets[i].GPU = ptr.To[int32](0)
	}
	sc.Spec.SlurmNodes.Worker.GPU = ptr.To[int32](0)
	in = fixtures.Input(sc)
	if got := slurmconf.WorkerGPUFlags(in, in.Cluster.WorkerSets()[2]); got != nil {
		t.Errorf("a CPU-only cluster's flags: %q, want none", got)
	}
}

// A partition whose sets have fewer MiB per CPU, CPUs per GPU or MiB per node than the workers
// the cluster's defaults come from gets the largest values that fit all its sets; a partition
// of sets that fit the cluster's defaults, or whose options set the key, gets none.
func TestPartitionsGetTheDefaultsTheirSetsFit(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_minimal")
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.SlurmNodes.Worker.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	sc.Spec.SlurmNodes.Worker.GPU = ptr.To[int32](4)
	small := func(cpu, mem string) *slurmv1alpha1.NodeSetResources {
		return &slurmv1alpha1.NodeSetResources{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	sc.Spec.SlurmNodes.NodeSets = []slurmv1alpha1.NodeSet{
		{Name: "small", Size: 2, GPU: ptr.To[int32](4), Resources: small("8", "16Gi")}, // half the workers' memory per CPU, 2 CPUs per GPU
		{Name: "big", Size: 2, GPU: ptr.To[int32](0), Resources: small("16", "128Gi")},
	}
	sc.Spec.SlurmConfig.Partitions = []slurmv1alpha1.Partition{
		{Name: "all", Default: true},
		{Name: "workers", NodeSets: []string{"worker", "big"}},
		{Name: "small", NodeSets: []string{"small"}},
		{Name: "mine", NodeSets: []string{"small"}, Options: "PriorityTier=2 defmempercpu=1000"},
	}
	in := fixtures.Input(sc)
	in.GPU, in.SetGPUs = base.GPU{Count: 4}, map[string]base.GPU{"small": {Count: 4}}
	d, _ := slurmconf.Defaults(in)
	set, _ := sc.WorkerSet("small")
	smallPerCPU := slurmconf.SetResources(set.Worker).RealMemoryMiB / 8
	if d.MemPerCPUMiB <= smallPerCPU || d.CPUPerGPU != 4 {
		t.Fatalf("the cluster's defaults: %+v, want more than the small set's %d MiB per CPU and 4 CPUs per GPU, from the workers", d, smallPerCPU)
	}
	mem := fmt.Sprintf("DefMemPerCPU=%d", smallPerCPU)
	for i, want := range []string{mem + " DefCpuPerGPU=2", "", mem + " DefCpuPerGPU=2", "DefCpuPerGPU=2"} {
		p := sc.Spec.SlurmConfig.Partitions[i]
		if got := strings.Join(slurmconf.PartitionDefaults(in, p, d), " "); got != want {
			t.Errorf("partition %s: %q, want %q", p.Name, got, want)
		}
	}
	conf := slurmconf.Files(in)["slurm-base.conf"]
	if !strings.Contains(conf, "PartitionName=small Nodes=small-[0-1] MaxTime=INFINITE State=UP "+mem+" DefCpuPerGPU=2\n") {
		t.Errorf("slurm.conf lacks the small partition's defaults:\n%s", conf)
	}
}
