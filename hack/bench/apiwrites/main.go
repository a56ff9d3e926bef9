// Command apiwrites counts the manager's own API requests, from a throwaway API server's audit
// log: the manager runs as a process of its own, as the operator's ServiceAccount bound to
// config/rbac/role.yaml, next to etcd, kube-apiserver and kube-controller-manager (StatefulSet
// and garbage collector controllers; no kubelet, so pods never run). It prints, by verb and
// resource, what the manager asked in each phase: start-up, the first window after one cluster
// is applied, steady state, the window after scaling 8 → 16 workers, N clusters applied at once,
// and a cache of thousands of GPU nodes. Run it with make bench; it is a measurement, not a test.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

type config struct {
	applyWindow, steadyWindow, scaleWindow, manyWindow time.Duration
	many                                               []int
	manyWorkers                                        int32
	nodes                                              int
	why                                                bool
}

func main() {
	short := flag.Bool("short", false, "windows of seconds instead of minutes: a quick look, not the recorded figures")
	many := flag.String("many", "50,200", "comma-separated counts of clusters applied at once (empty: skip)")
	manyWorkers := flag.Int("many-workers", 64, "workers of each cluster applied at once")
	nodes := flag.Int("nodes", 5000, "GPU Node objects for the cache phase (0: skip)")
	why := flag.Bool("why", false, "print the body of each status patch of the one-cluster phases")
	flag.Parse()
	cfg := config{applyWindow: 120 * time.Second, steadyWindow: 180 * time.Second, scaleWindow: 60 * time.Second,
		manyWindow: 120 * time.Second, manyWorkers: int32(*manyWorkers), nodes: *nodes, why: *why}
	if *short {
		cfg.applyWindow, cfg.steadyWindow, cfg.scaleWindow, cfg.manyWindow = 20*time.Second, 30*time.Second, 15*time.Second, 30*time.Second
	}
	for _, s := range strings.Split(*many, ",") {
		if s = strings.TrimSpace(s); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				fail(fmt.Errorf("-many: %q is not a count", s))
			}
			cfg.many = append(cfg.many, n)
		}
	}
	if err := run(cfg); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "apiwrites:", err)
	os.Exit(1)
}

func run(cfg config) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "apiwrites-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	env, admin, adminKubeconfig, err := kube.StartEnv([]string{filepath.Join(root, "config", "crd", "bases")}, func(env *envtest.Environment) {
		env.ControlPlane.GetAPIServer().Configure().
			Set("audit-policy-file", policy).Set("audit-log-path", auditLog).
			Set("audit-log-mode", "blocking").Set("audit-log-maxsize", "0")
	})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	defer os.Remove(adminKubeconfig)

	kcm, err := startControllerManager(adminKubeconfig, dir)
	if err != nil {
		return err
	}
	defer stop(kcm)

	user, err := kube.OperatorUser(env, admin, filepath.Join(root, "config", "rbac", "role.yaml"))
	if err != nil {
		return err
	}
	operatorKubeconfig := filepath.Join(dir, "operator.kubeconfig")
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(operatorKubeconfig, data, 0o600); err != nil {
		return err
	}
	manager := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", manager, "./cmd/manager")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the manager: %w", err)
	}

	b := &bench{cfg: cfg, admin: admin, auditLog: auditLog, user: kube.OperatorUserName}
	started := time.Now()
	mgr := exec.Command(manager, "--kubeconfig="+operatorKubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0")
	mgrLog, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return err
	}
	defer mgrLog.Close()
	mgr.Stdout, mgr.Stderr = mgrLog, mgrLog
	if err := mgr.Start(); err != nil {
		return err
	}
	defer stop(mgr)
	b.pid = mgr.Process.Pid

	fmt.Printf("machine: %d CPUs; manager pid %d; windows: apply %s, steady %s, scale %s, many %s\n\n",
		cpus(), b.pid, cfg.applyWindow, cfg.steadyWindow, cfg.scaleWindow, cfg.manyWindow)
	ctx := context.Background()
	return b.phases(ctx, started)
}

func startControllerManager(kubeconfig, dir string) (*exec.Cmd, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	cmd := exec.Command(filepath.Join(assets, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers=statefulset,garbagecollector", "--use-service-account-credentials=false")
	f, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kube-controller-manager: %w", err)
	}
	return cmd, nil
}

func stop(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	}
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// rssMiB is the process's resident memory.
func rssMiB(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return -1
}

func cpus() int {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "processor\t:")
}
