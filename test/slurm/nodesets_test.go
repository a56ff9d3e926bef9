package slurm_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/exporter"
	"github.com/slurm-k8s/slurm-operator/internal/gpu"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// setsSpec is spec with three worker sets on three pools of nodes: the workers on H100 nodes,
// a set a100 on A100 nodes, a CPU-only set cpu; partitions gpu (both GPU sets, the default),
// h100 (the workers) and cpu. Accounting is off: nothing here reads it.
func setsSpec(t testing.TB, cpuNodes int32) *slurmv1alpha1.SlurmCluster {
	sc := spec(t, 1)
	sc.Spec.SlurmNodes.Accounting = slurmv1alpha1.Accounting{}
	sc.Spec.K8sNodeFilters = []slurmv1alpha1.K8sNodeFilter{
		{Name: "h100", NodeSelector: map[string]slurmv1alpha1.LabelValue{"pool": "h100"}},
		{Name: "a100", NodeSelector: map[string]slurmv1alpha1.LabelValue{"pool": "a100"}},
		{Name: "cpu", NodeSelector: map[string]slurmv1alpha1.LabelValue{"pool": "cpu"}},
	}
	sc.Spec.SlurmNodes.Worker.K8sNodeFilterName = "h100"
	sc.Spec.SlurmNodes.NodeSets = []slurmv1alpha1.NodeSet{
		{Name: "a100", Size: 1, K8sNodeFilterName: "a100", Features: []string{"ampere"}},
		// Half the workers' memory per CPU: the cpu partition gets a DefMemPerCPU of its own.
		{Name: "cpu", Size: cpuNodes, K8sNodeFilterName: "cpu", GPU: ptr.To[int32](0), Resources: &slurmv1alpha1.NodeSetResources{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")}}},
	}
	sc.Spec.SlurmConfig.Partitions = []slurmv1alpha1.Partition{
		{Name: "gpu", NodeSets: []string{"worker", "a100"}, Default: true},
		{Name: "h100", NodeSets: []string{"worker"}},
		{Name: "cpu", NodeSets: []string{"cpu"}},
	}
	return sc
}

// poolNodes are the Kubernetes nodes of the three pools, labelled as the GPU Operator would.
func poolNodes() []corev1.Node {
	node := func(name, pool, product string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
		if product != "" {
			n.Labels[gpu.LabelPresent], n.Labels[gpu.LabelCount], n.Labels[gpu.LabelProduct] = "true", fmt.Sprint(gpusPerWorker), product
		}
		return n
	}
	return []corev1.Node{
		node("h100-node", "h100", "NVIDIA-H100-80GB-HBM3"),
		node("a100-node", "a100", "NVIDIA-A100-SXM4-80GB"),
		node("cpu-node-0", "cpu", ""),
		node("cpu-node-1", "cpu", ""),
	}
}

// renderSets renders spec's files with each set's GPU shape from its filter's nodes, as the
// controller does.
func renderSets(t testing.TB, sc *slurmv1alpha1.SlurmCluster) rendered {
	t.Helper()
	r := render(t, sc)
	sets := r.in.WorkerSets()
	r.in.GPU = gpu.FindSet(r.in.Cluster, sets[0], poolNodes()).GPU
	r.in.SetGPUs = map[string]base.GPU{}
	for _, set := range sets[1:] {
		r.in.SetGPUs[set.Name] = gpu.FindSet(r.in.Cluster, set, poolNodes()).GPU
	}
	r.files = slurmFiles(r.in)
	return r
}

// setHost is pod i of a worker set as the harness runs it: named as the pod, registering as
// the set's Slurm node, with the gres.conf lines its entrypoint writes from the set's flags.
func setHost(t testing.TB, r rendered, set string, i int) slurmharness.Host {
	t.Helper()
	ws, ok := r.in.Cluster.WorkerSet(set)
	if !ok {
		t.Fatalf("no worker set %q", set)
	}
	h := workerHost(i)
	h.Name, h.SlurmName = fmt.Sprintf("demo-%s-%d", set, i), fmt.Sprintf("%s-%d", set, i)
	h.SlurmdScript = worker.SlurmdScript
	h.GPUs = int(r.in.GPUOf(ws.Name).Total())
	h.RunFiles = setEntrypointRunFiles(t, r.in, ws, allMinors(h.GPUs))
	return h
}

// Three worker sets of different hardware in one cluster, on the exact bytes the operator
// renders: typed gres picks the set within a partition, a partition holds only its sets (with
// scheduling defaults its smaller nodes fit), an ordinary user runs on each set as themselves,
// and adding and removing a node of one set (reconfigure) leaves a job on another set running.
func TestNodeSetsOfMixedHardware(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := renderSets(t, setsSpec(t, 1))
	for _, want := range []string{"Gres=gpu:h100:2", "Gres=gpu:a100:2", "Features=a100,ampere", "PartitionName=gpu Nodes=worker-0,a100-0 Default=YES", "PartitionName=cpu Nodes=cpu-0 ", "State=UP DefMemPerCPU="} {
		if !strings.Contains(string(r.files["slurm-base.conf"]), want) {
			t.Fatalf("slurm-base.conf lacks %q:\n%s", want, r.files["slurm-base.conf"])
		}
	}
	c := startClusterWith(t, ctx, r, 0, func(cfg *slurmharness.Config) {
		cfg.Accounting, cfg.SlurmdbdConf = nil, nil
		cfg.Workers = []slurmharness.Host{setHost(t, r, "worker", 0), setHost(t, r, "a100", 0), setHost(t, r, "cpu", 0)}
	})
	waitIdle(t, ctx, c, "worker-0", "a100-0", "cpu-0")

	t.Run("the gpu partition runs a typed request on the set of that type", func(t *testing.T) {
		for _, tc := range []struct{ gres, host, devices string }{
			{"gpu:h100:1", "demo-worker-0", "0"},
			{"gpu:a100:2", "demo-a100-0", "0,1"},
		} {
			out := login(t, ctx, c, "srun", "-p", "gpu", "--gres="+tc.gres, "sh", "-c", `echo "$(hostname) $CUDA_VISIBLE_DEVICES"`)
			if got := strings.TrimSpace(out); got != tc.host+" "+tc.devices {
				t.Errorf("srun -p gpu --gres=%s: %q, want %q", tc.gres, got, tc.host+" "+tc.devices)
			}
		}
		out := login(t, ctx, c, "srun", "-p", "gpu", "--constraint=ampere", "hostname")
		if strings.TrimSpace(out) != "demo-a100-0" {
			t.Errorf("srun -p gpu --constraint=ampere ran on %q", out)
		}
	})

	t.Run("a partition holds only its sets", func(t *testing.T) {
		out := login(t, ctx, c, "sinfo", "-h", "-o", "%P %N")
		for _, want := range []string{"gpu* a100-0,worker-0", "h100 worker-0", "cpu cpu-0"} {
			if !strings.Contains(out, want) {
				t.Errorf("sinfo lacks %q:\n%s", want, out)
			}
		}
		if out, err := c.Exec(ctx, loginHost, "srun", "-p", "h100", "--gres=gpu:a100:1", "--immediate=5", "true"); err == nil {
			t.Errorf("an A100 request ran in partition h100: %s", out)
		}
		if out, err := c.Exec(ctx, loginHost, "srun", "-p", "cpu", "--gres=gpu:1", "--immediate=5", "true"); err == nil {
			t.Errorf("a GPU request ran in partition cpu: %s", out)
		}
		// Both CPUs and no --mem: the cluster's DefMemPerCPU (the workers') would ask for
		// twice the node's memory; the partition's own fits.
		out = login(t, ctx, c, "srun", "-p", "cpu", "-c", "2", "sh", "-c", `echo "$(hostname) ${CUDA_VISIBLE_DEVICES:-none}"`)
		if strings.TrimSpace(out) != "demo-cpu-0 none" {
			t.Errorf("srun -p cpu -c 2: %q, want demo-cpu-0 with no GPU", out)
		}
	})

	t.Run("an ordinary user runs on each set as themselves", func(t *testing.T) {
		for _, h := range c.Hosts() {
			if _, err := c.Exec(ctx, h, "sh", "-c", "id bob || useradd -u 2002 -m bob"); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct{ args, want string }{
			{"-p cpu", "demo-cpu-0 bob"},
			{"-p gpu --gres=gpu:a100:1", "demo-a100-0 bob"},
			{"-p h100 --gres=gpu:1", "demo-worker-0 bob"},
		} {
			out, err := c.Exec(ctx, loginHost, "su", "bob", "-c", "srun "+tc.args+` sh -c 'echo "$(hostname) $(id -un)"'`)
			if err != nil || strings.TrimSpace(out) != tc.want {
				t.Errorf("bob: srun %s: %q (%v), want %q", tc.args, out, err, tc.want)
			}
		}
	})

	t.Run("the exporter names each node's set and sums each set's nodes, CPUs and GPUs as sinfo counts them", func(t *testing.T) {
		cl, err := slurmtest.StartRestd(ctx, c, ctlHost, r.in.Cluster, r.in.Keys.JWT)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(exporter.New(cl, exporter.Options{Cluster: "demo", Timeout: 5 * time.Second, MaxAge: time.Minute}))
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		defer srv.Close()
		job := sbatch(t, ctx, c, "-p", "gpu", "--gres=gpu:a100:1", "-o", "/dev/null", "--wrap", "sleep 120")
		defer login(t, ctx, c, "scancel", job)
		waitJobState(t, ctx, c, job, "RUNNING")

		m := scrape(t, srv.URL)
		for node, set := range map[string]string{"worker-0": "worker", "a100-0": "a100", "cpu-0": "cpu"} {
			if v := m["slurm_node_info{node="+node+",node_set="+set+"}"]; v != 1 {
				t.Errorf("slurm_node_info of %s in set %s: %v", node, set, v)
			}
		}
		if got := m.By("slurm_node_set_nodes", "node_set"); got["worker"] != 1 || got["a100"] != 1 || got["cpu"] != 1 {
			t.Errorf("slurm_node_set_nodes by set: %v", got)
		}
		for series, want := range map[string]float64{
			"slurm_node_set_gpus{node_set=a100,type=a100}":             2,
			"slurm_node_set_gpus_allocated{node_set=a100,type=a100}":   1,
			"slurm_node_set_gpus_idle{node_set=a100,type=a100}":        1,
			"slurm_node_set_gpus{node_set=worker,type=h100}":           2,
			"slurm_node_set_gpus_allocated{node_set=worker,type=h100}": 0,
		} {
			if got, ok := m[series]; !ok || got != want {
				t.Errorf("%s = %v (served: %v), want %v", series, got, ok, want)
			}
		}
		if got := m.By("slurm_node_set_gpus", "node_set"); got["cpu"] != 0 {
			t.Errorf("the cpu set has GPUs: %v", got)
		}
		for set, node := range map[string]string{"worker": "worker-0", "a100": "a100-0", "cpu": "cpu-0"} {
			cpus, err := strconv.ParseFloat(strings.TrimSpace(login(t, ctx, c, "sinfo", "-h", "-n", node, "-o", "%c")), 64)
			if err != nil || m["slurm_node_set_cpus{node_set="+set+"}"] != cpus {
				t.Errorf("slurm_node_set_cpus of %s: %v, sinfo says %v (%v)", set, m["slurm_node_set_cpus{node_set="+set+"}"], cpus, err)
			}
		}
	})

	t.Run("growing and shrinking the cpu set leaves a job on the a100 set running", func(t *testing.T) {
		job := sbatch(t, ctx, c, "-p", "gpu", "--gres=gpu:a100:1", "-o", "/dev/null", "--wrap", "sleep 45")
		waitJobState(t, ctx, c, job, "RUNNING")
		grown := renderSets(t, setsSpec(t, 2))
		// As on Kubernetes: the ConfigMap and the new pod, whose slurmd waits until slurmctld
		// lists its node; the reconfigure sidecar then finds the pod's name resolvable.
		if err := c.UpdateSlurmFiles(grown.files); err != nil {
			t.Fatal(err)
		}
		if err := c.AddWorker(ctx, setHost(t, grown, "cpu", 1)); err != nil {
			t.Fatal(err)
		}
		if err := c.Reconfigure(ctx, ctlHost); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, ctx, c, "cpu-1")
		out := login(t, ctx, c, "srun", "-p", "cpu", "-N", "2", "hostname")
		if hosts := strings.Fields(out); len(hosts) != 2 || !strings.Contains(out, "demo-cpu-1") {
			t.Fatalf("srun -p cpu -N 2 after the set grew: %q", out)
		}
		// And back: drained, its pod gone, then the node list without it.
		login(t, ctx, c, "scontrol", "update", "nodename=cpu-1", "state=drain", "reason=scale-down")
		if err := c.StopWorker(ctx, "demo-cpu-1"); err != nil {
			t.Fatal(err)
		}
		if err := c.UpdateSlurmFiles(r.files); err != nil {
			t.Fatal(err)
		}
		if err := c.Reconfigure(ctx, ctlHost); err != nil {
			t.Fatal(err)
		}
		if out := login(t, ctx, c, "sinfo", "-h", "-p", "cpu", "-o", "%N"); strings.TrimSpace(out) != "cpu-0" {
			t.Errorf("the cpu partition after the set shrank: %q", out)
		}
		if state := jobState(t, ctx, c, job); state != "RUNNING" {
			t.Fatalf("the a100 job is %s after the cpu set grew and shrank, want RUNNING", state)
		}
		waitJobState(t, ctx, c, job, "COMPLETED")
	})
}

// waitIdle waits until each node is idle.
func waitIdle(t *testing.T, ctx context.Context, c *slurmharness.Cluster, nodes ...string) {
	t.Helper()
	out := ""
	if err := c.WaitFor(ctx, strings.Join(nodes, ", ")+" idle", func() (bool, error) {
		var err error
		out, err = c.Exec(ctx, loginHost, "sinfo", "-h", "-N", "-o", "%N %t")
		for _, n := range nodes {
			if !strings.Contains(out, n+" idle") {
				return false, err
			}
		}
		return err == nil, err
	}); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// jobState is the job's JobState as slurmctld reports it (no accounting needed).
func jobState(t *testing.T, ctx context.Context, c *slurmharness.Cluster, id string) string {
	t.Helper()
	out := login(t, ctx, c, "scontrol", "show", "job", id)
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "JobState="); ok {
			return v
		}
	}
	t.Fatalf("no JobState for job %s: %s", id, out)
	return ""
}

// waitJobState waits for the job's JobState; an end in another state fails at once.
func waitJobState(t *testing.T, ctx context.Context, c *slurmharness.Cluster, id, state string) {
	t.Helper()
	last := ""
	if err := c.WaitFor(ctx, "job "+id+" "+state, func() (bool, error) {
		last = jobState(t, ctx, c, id)
		if last != state && last != "PENDING" && last != "RUNNING" && last != "CONFIGURING" && last != "COMPLETING" {
			return false, slurmharness.Permanent(fmt.Errorf("job %s is %s, not %s", id, last, state))
		}
		return last == state, nil
	}); err != nil {
		t.Fatal(err)
	}
}
