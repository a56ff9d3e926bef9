package slurm_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/gpu"
	"github.com/slurm-k8s/slurm-operator/internal/jailexec"
	"github.com/slurm-k8s/slurm-operator/internal/render/accounting"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/render/shared"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

const gpusPerWorker = 2

// spec is the SlurmCluster under test: controller, workers on GPU nodes, one login node,
// accounting through the database the operator would create.
func spec(t testing.TB, workers int32) *slurmv1alpha1.SlurmCluster {
	t.Helper()
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_minimal")
	if err != nil {
		t.Fatal(err)
	}
	sc.Name, sc.Spec.ClusterName = "demo", "demo"
	sc.Spec.K8sNodeFilters = []slurmv1alpha1.K8sNodeFilter{{Name: "gpu", NodeSelector: map[string]slurmv1alpha1.LabelValue{gpu.LabelPresent: "true"}}}
	sc.Spec.SlurmNodes.Worker.K8sNodeFilterName = "gpu"
	sc.Spec.SlurmNodes.Worker.Size = workers
	// Two CPUs (what this machine has) and 4 GiB: the scheduling defaults are derived from them.
	sc.Spec.SlurmNodes.Worker.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
	sc.Spec.SlurmNodes.Accounting = slurmv1alpha1.Accounting{Enabled: true, MariadbOperator: &slurmv1alpha1.MariadbOperator{Enabled: true}}
	sc.Spec.SlurmConfig.ExtraSlurmConf = []slurmv1alpha1.ConfigLine{"SchedulerParameters=bf_interval=5"}
	return sc
}

// gpuNodes are Kubernetes nodes labelled by the GPU Operator as 2 x H100 each.
func gpuNodes() []corev1.Node {
	var out []corev1.Node
	for i := 0; i < 2; i++ {
		out = append(out, corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("gpu-node-%d", i),
			Labels: map[string]string{
				gpu.LabelPresent: "true", gpu.LabelCount: fmt.Sprint(gpusPerWorker), gpu.LabelProduct: "NVIDIA-H100-80GB-HBM3",
			},
		}})
	}
	return out
}

// rendered is what the operator renders for the spec: the same functions, the same bytes.
type rendered struct {
	in       base.Input
	files    map[string][]byte
	slurmdbd []byte
}

func render(t testing.TB, sc *slurmv1alpha1.SlurmCluster) rendered {
	t.Helper()
	in := fixtures.Input(sc)
	in.GPU = gpu.Find(in.Cluster, gpuNodes()).GPU
	dbd := accounting.ConfigSecret(in).Data[slurmconf.SlurmdbdConf]
	return rendered{in: in, files: slurmFiles(in), slurmdbd: dbd}
}

// slurmFiles are the files of the cluster's Slurm ConfigMap, by name.
func slurmFiles(in base.Input) map[string][]byte {
	files := map[string][]byte{}
	for name, text := range shared.SlurmConfigMap(in).Data {
		files[name] = []byte(text)
	}
	return files
}

// workerHost is worker i as its pod runs it: named as the pod, and slurmd started by the
// rendered script, registering as worker-i with its config fetched from slurmctld.
func workerHost(i int) slurmharness.Host {
	demo := &slurmv1alpha1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	demo.Spec.SlurmNodes.Controller.Size = 1
	return slurmharness.Host{Name: fmt.Sprintf("demo-worker-%d", i), SlurmName: fmt.Sprintf("worker-%d", i), GPUs: gpusPerWorker,
		SlurmdScript: worker.SlurmdScript, SlurmdEnv: []string{"SLURM_CONF_SERVER=" + worker.ConfServer(demo)}}
}

// podWorker is workerHost as a pod of the rendered cluster given every GPU of its host: with
// the gres.conf lines the worker entrypoint writes in /run, from the flags the operator renders.
func podWorker(t testing.TB, r rendered, i int) slurmharness.Host {
	t.Helper()
	h := workerHost(i)
	h.RunFiles = entrypointRunFiles(t, r.in, allMinors(h.GPUs))
	return h
}

func allMinors(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// entrypointRunFiles are the files the worker entrypoint writes in /run for a pod the device
// plugin gave these GPUs of its host (the host's own being 0..len-1 of GPUs, or more).
func entrypointRunFiles(t testing.TB, in base.Input, minors []int, node ...int) map[string][]byte {
	t.Helper()
	return setEntrypointRunFiles(t, in, in.Cluster.WorkerSets()[0], minors, node...)
}

// setEntrypointRunFiles is entrypointRunFiles for a pod of one worker set.
func setEntrypointRunFiles(t testing.TB, in base.Input, set slurmv1alpha1.WorkerSet, minors []int, node ...int) map[string][]byte {
	t.Helper()
	var cfg jailexec.Config
	fs := flag.NewFlagSet("slurm-jail-exec", flag.ContinueOnError)
	jailexec.GPUFlags(fs, &cfg)
	if err := fs.Parse(slurmconf.WorkerGPUFlags(in, set)); err != nil {
		t.Fatal(err)
	}
	if cfg.GresConf == "" {
		return nil
	}
	if node == nil {
		node = minors
	}
	p := jailexec.PodGPUs{Minors: minors, Node: node, From: "the harness"}
	return map[string][]byte{cfg.GresConf: []byte(jailexec.GresConf(p, cfg.Gres))}
}

const (
	ctlHost   = "demo-controller-0"
	loginHost = "demo-login-0"
)

// startCluster starts hosts named as the pods would be, with the rendered config.
func startCluster(t testing.TB, ctx context.Context, r rendered, workers int) *slurmharness.Cluster {
	t.Helper()
	return startClusterWith(t, ctx, r, workers, func(*slurmharness.Config) {})
}

// startClusterWith is startCluster with the harness's configuration changed by edit first.
func startClusterWith(t testing.TB, ctx context.Context, r rendered, workers int, edit func(*slurmharness.Config)) *slurmharness.Cluster {
	t.Helper()
	root := os.Getenv("SLURM_ROOTFS")
	if root == "" {
		t.Skip("SLURM_ROOTFS is not set: run 'make test' (hack/slurm-rootfs.sh builds the Slurm root file system)")
	}
	var hosts []slurmharness.Host
	for i := 0; i < workers; i++ {
		hosts = append(hosts, podWorker(t, r, i))
	}
	cfg := slurmharness.Config{
		RootFS:       root,
		SlurmFiles:   r.files,
		MungeKey:     r.in.Keys.Munge,
		JWTKey:       r.in.Keys.JWT,
		Controller:   slurmharness.Host{Name: ctlHost},
		Workers:      hosts,
		Logins:       []slurmharness.Host{{Name: loginHost}},
		Accounting:   &slurmharness.Host{Name: "demo-accounting-0", Aliases: []string{"demo-accounting", "demo-mariadb"}},
		SlurmdbdConf: r.slurmdbd,
	}
	edit(&cfg)
	// The controller's script makes an empty file where gres.conf includes each worker's own
	// (slurmctld.EmptyNodeGresConf): slurmctld reads gres.conf's includes too.
	// (slurmctld.EmptyNodeGresConf links it to the config's ControllerGresConf where it has one).
	empty := map[string][]byte{slurmfacts.NodeGresConf: r.files[slurmconf.ControllerGresConf]}
	cfg.Controller.RunFiles = empty
	if cfg.BackupController != nil {
		cfg.BackupController.RunFiles = empty
	}
	c, err := slurmharness.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start the cluster from the rendered config: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range c.Hosts() {
				t.Logf("logs of %s:\n%s", h, c.Logs(h))
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return c
}

func login(t *testing.T, ctx context.Context, c *slurmharness.Cluster, args ...string) string {
	t.Helper()
	out, err := c.Exec(ctx, loginHost, args...)
	if err != nil {
		t.Fatalf("%s on %s: %v", strings.Join(args, " "), loginHost, err)
	}
	return out
}

func sinfoNodes(t *testing.T, ctx context.Context, c *slurmharness.Cluster) map[string]string {
	t.Helper()
	out := login(t, ctx, c, "sinfo", "-N", "-h", "-o", "%N %t %P")
	nodes := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 {
			nodes[f[0]] = f[1] + " " + f[2]
		}
	}
	return nodes
}

// waitJob waits until sacct shows the job in the state. A job that ends otherwise (or stays
// pending after a requeue) fails the test at once with what sacct and squeue say, rather than
// waiting out the test's whole time.
func waitJob(t *testing.T, ctx context.Context, c *slurmharness.Cluster, id, state string) {
	t.Helper()
	last := ""
	if err := c.WaitFor(ctx, "job "+id+" "+state, func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "sacct", "-n", "-X", "-P", "-j", id, "-o", "State")
		last = strings.TrimSpace(out)
		if err == nil && last != state && terminalJobState(last) {
			q, _ := c.Exec(ctx, loginHost, "scontrol", "show", "job", id)
			return false, slurmharness.Permanent(fmt.Errorf("job %s ended %s, not %s:\n%s", id, last, state, q))
		}
		return err == nil && last == state, nil
	}); err != nil {
		t.Fatalf("%v (sacct: %q)", err, last)
	}
}

// terminalJobState reports whether sacct's state is one a job does not leave.
func terminalJobState(s string) bool {
	for _, p := range []string{"FAILED", "NODE_FAIL", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED", "REQUEUED"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

var jobID = regexp.MustCompile(`Submitted batch job (\d+)`)

func sbatch(t *testing.T, ctx context.Context, c *slurmharness.Cluster, args ...string) string {
	t.Helper()
	out := login(t, ctx, c, append([]string{"sbatch"}, args...)...)
	m := jobID.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("sbatch printed %q", out)
	}
	return m[1]
}
