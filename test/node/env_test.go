package node

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// env is the running node and what the test made.
type env struct {
	t          testing.TB
	root       string
	assets     string
	kubeconfig string
	// key is root's key (in sshRootPublicKeys); sshConfig an ssh_config that uses it, for
	// `ssh -F sshConfig -J root@<login Service> root@login-1`.
	key       string
	pub       string
	sshConfig string
	// login is the login Service's address.
	login string
	// pollEvery, when set, is how often waitFor looks.
	pollEvery time.Duration
	// nodeEnv is hack/node.sh's settings (NODE_WORKERS=2), for every command the test runs.
	nodeEnv []string
}

// lockNode holds the node's lock until the test ends: the node is one per machine (its
// folder, bridge, ports and iptables chains are fixed), so a second run on the same machine
// waits for the first instead of taking its node down under it.
func lockNode(t testing.TB) {
	dir := os.Getenv("NODE_DIR")
	if dir == "" {
		dir = "/tmp/slurm-operator-node"
	}
	f, err := os.OpenFile(filepath.Clean(dir)+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("node lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Logf("another run holds %s; waiting for it", f.Name())
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatalf("node lock: %v", err)
		}
	}
	// Registered before the node's own cleanup, so it runs after it (cleanups run last first).
	t.Cleanup(func() { _ = f.Close() })
}

// startNode builds the images, starts the node (torn down when the test ends, unless
// NODE_KEEP is set) and imports the images; it returns the env with root's key made. nodeEnv
// are hack/node.sh's settings (NODE_WORKERS=2 for worker nodes).
func startNode(t testing.TB, nodeEnv ...string) *env {
	if os.Getenv("NODE_TEST") == "" {
		t.Skip("set NODE_TEST=1 (make test does) to run on a real node; it needs root")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the node test needs root")
	}
	e := &env{t: t, nodeEnv: nodeEnv}
	e.root, _ = filepath.Abs(filepath.Join("..", ".."))
	e.assets = strings.TrimSpace(e.sh("", "hack/test-assets.sh", "--print-dir"))

	// Images first: a failed build should not leave a node behind.
	var layouts, workerLayouts []string
	for _, line := range strings.Split(strings.TrimSpace(e.sh("", "hack/images.sh")), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			layouts = append(layouts, f[1])
			// What a worker pod runs (slurmd and munged), and slurmctld, which the three-node
			// test moves to a GPU node.
			if strings.Contains(f[0], "/slurmd:") || strings.Contains(f[0], "/munge:") || strings.Contains(f[0], "/slurmctld:") {
				workerLayouts = append(workerLayouts, f[1])
			}
		}
	}
	if len(layouts) < 9 {
		t.Fatalf("hack/images.sh built %d images, want 9", len(layouts))
	}
	lockNode(t)
	t.Cleanup(func() {
		if t.Failed() && e.kubeconfig != "" {
			e.dump()
		}
		if os.Getenv("NODE_KEEP") == "" {
			out, err := e.run(context.Background(), "", "hack/node.sh", "down")
			if err != nil {
				t.Errorf("hack/node.sh down: %v\n%s", err, out)
			}
		}
	})
	e.kubeconfig = strings.TrimSpace(lastLine(e.sh("", "hack/node.sh", "up")))
	// With worker nodes, they get only what a worker or controller pod runs (their taint keeps
	// every other pod off them); the control-plane node gets every image.
	if nodes := strings.Fields(e.sh("", "hack/node.sh", "nodes")); len(nodes) > 0 {
		e.sh("", append([]string{"hack/node.sh", "import-into", "slurm-test-node"}, layouts...)...)
		for _, n := range nodes {
			e.sh("", append([]string{"hack/node.sh", "import-into", n}, workerLayouts...)...)
		}
	} else {
		e.sh("", append([]string{"hack/node.sh", "import"}, layouts...)...)
	}

	e.key = filepath.Join(t.TempDir(), "id_ed25519")
	e.pub = writeKey(t, e.key)
	e.sshConfig = filepath.Join(t.TempDir(), "ssh_config")
	writeSSHConfig(t, e.sshConfig, e.key)
	return e
}

// installAll does the document's section 2.1 on the node: the claims and the database, the
// operator chart, then helm-slurm-cluster with the document's values, until Available.
func (e *env) installAll(values ...string) {
	e.t.Helper()
	e.kubectlIn(storageManifests(), "apply", "-f", "-")
	e.helm("install", "slurm-operator", filepath.Join(e.root, "charts/slurm-operator"),
		"-n", "slurm-system", "--create-namespace", "--set", "image.pullPolicy=Never", "--wait", "--timeout", "5m")
	e.installCluster([]string{e.pub}, values...)
}

// installCluster installs helm-slurm-cluster with the document's values (then the files in
// values, under test/node/testdata) and root's keys, waits until the cluster is Available, and
// notes the login Service's address.
func (e *env) installCluster(keys []string, values ...string) {
	e.t.Helper()
	args := []string{"install", cluster, filepath.Join(e.root, "charts/helm-slurm-cluster"), "-n", ns,
		"-f", filepath.Join(e.root, "test/node/testdata/values.yaml")}
	for _, v := range values {
		args = append(args, "-f", filepath.Join(e.root, "test/node/testdata", v))
	}
	e.helm(append(args, "--set-json", "slurmNodes.login.sshRootPublicKeys="+jsonList(keys))...)
	e.waitFor(15*time.Minute, "SlurmCluster Available", func() (bool, string) {
		out, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o",
			`jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}`)
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "Available=True ") {
				return true, out
			}
		}
		return false, out
	})
	e.login = strings.TrimSpace(e.kubectlOK("get", "service", cluster+"-login", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
}

// installStandInNvidiaSMI puts the stand-in nvidia-smi in the shared root from a login node,
// and waits until the health checks have lifted the drains they set without it.
func (e *env) installStandInNvidiaSMI() {
	e.t.Helper()
	e.onLogin("cat > /usr/local/bin/nvidia-smi <<'SMI'\n" + standInNvidiaSMI + "SMI\nchmod 0755 /usr/local/bin/nvidia-smi")
	e.waitFor(3*time.Minute, "both workers idle", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sinfo -h -N -o '%N %t' | sort -u")
		return strings.TrimSpace(out) == "worker-0 idle\nworker-1 idle", out
	})
}

// setSize sets the worker size as kubectl edit would.
func (e *env) setSize(n int) {
	e.t.Helper()
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"slurmNodes":{"worker":{"size":%d}}}}`, n))
}

func jsonList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ",") + "]"
}

func writeKey(t testing.TB, path string) string {
	pubKey, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "node test")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pubKey)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " node-test"
}

func (e *env) run(ctx context.Context, stdin string, name string, args ...string) (string, error) {
	if !filepath.IsAbs(name) && strings.Contains(name, "/") {
		name = filepath.Join(e.root, name)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = e.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(os.TempDir(), "node-test-helm"), "HELM_CONFIG_HOME="+filepath.Join(os.TempDir(), "node-test-helm"))
	cmd.Env = append(cmd.Env, e.nodeEnv...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// sh runs a command that must succeed within 45 minutes (an image build on a cold machine).
func (e *env) sh(stdin string, argv ...string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	out, err := e.run(ctx, stdin, argv[0], argv[1:]...)
	if err != nil {
		e.t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return out
}

func (e *env) kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return e.run(ctx, "", filepath.Join(e.assets, "kubectl"), args...)
}

func (e *env) kubectlOK(args ...string) string {
	e.t.Helper()
	out, err := e.kubectl(args...)
	if err != nil {
		e.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (e *env) kubectlIn(stdin string, args ...string) string {
	e.t.Helper()
	return e.sh(stdin, append([]string{filepath.Join(e.assets, "kubectl")}, args...)...)
}

func (e *env) helm(args ...string) string {
	e.t.Helper()
	return e.sh("", append([]string{filepath.Join(e.assets, "helm")}, args...)...)
}

func (e *env) sshErr(host, script string) (string, error) {
	return e.sshAs(e.key, "root@"+host, script)
}

// sshAs runs script over ssh as user@host with a key file.
func (e *env) sshAs(key, userHost, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return e.run(ctx, "", "ssh", sshArgs(key, userHost, script)...)
}

func sshArgs(key, userHost, script string) []string {
	return []string{"-i", key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", userHost, script}
}

func (e *env) ssh(host, script string) string {
	e.t.Helper()
	out, err := e.sshErr(host, script)
	if err != nil {
		e.t.Fatalf("ssh root@%s %q: %v\n%s", host, script, err, out)
	}
	return out
}

// waitFor polls cond until it holds, failing with its last words after timeout.
func (e *env) waitFor(timeout time.Duration, what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, words := cond()
		if ok {
			return
		}
		last = words
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not after %v; last seen:\n%s", what, timeout, last)
		}
		time.Sleep(e.poll())
	}
}

// poll is how long waitFor sleeps between looks: 3 s, or pollEvery when set (benchmarks).
func (e *env) poll() time.Duration {
	if e.pollEvery > 0 {
		return e.pollEvery
	}
	return 3 * time.Second
}

// dump prints what explains a failure: the objects, events and every container's log.
func (e *env) dump() {
	for _, args := range [][]string{
		{"get", "nodes,pods,pvc,pv,svc", "-A", "-o", "wide"},
		{"get", "slurmcluster", "-n", ns, "-o", "yaml"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
	} {
		out, _ := e.kubectl(args...)
		e.t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	pods, _ := e.kubectl("get", "pods", "-A", "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{" "}{range .spec.initContainers[*]}{.name},{end}{range .spec.containers[*]}{.name},{end}{"\n"}{end}`)
	for _, line := range strings.Split(strings.TrimSpace(pods), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		nsName := strings.SplitN(f[0], "/", 2)
		for _, c := range strings.Split(strings.Trim(f[1], ","), ",") {
			out, _ := e.kubectl("logs", "-n", nsName[0], nsName[1], "-c", c, "--tail=60")
			e.t.Logf("logs %s [%s]:\n%s", f[0], c, out)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// with is e for a subtest: its failures fail that subtest (and stop it alone), not the parent.
func (e *env) with(t testing.TB) *env {
	c := *e
	c.t = t
	return &c
}

// writeSSHConfig writes an ssh_config for the test's own ssh client: root's key, no host key
// records (the cluster's host keys are new to this machine), batch mode.
func writeSSHConfig(t testing.TB, path, key string) {
	cfg := "Host *\n  IdentityFile " + key + "\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n" +
		"  LogLevel ERROR\n  BatchMode yes\n  ConnectTimeout 10\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sshJump runs script as root on a node reached through the login Service, by the name Slurm
// gives it (login-1, worker-0): `ssh -J root@<login Service> root@<node>`. The login node's
// sshd resolves the name.
func (e *env) sshJump(node, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return e.run(ctx, "", "ssh", "-F", e.sshConfig, "-J", "root@"+e.login, "root@"+node, script)
}

// onLogin runs script as root on the login Service; it must succeed.
func (e *env) onLogin(script string) string {
	e.t.Helper()
	return e.ssh(e.login, script)
}

// slurmState is a node's state and reason as slurmctld has them.
func (e *env) slurmState(node string) (state, reason string) {
	out, _ := e.sshErr(e.login, "scontrol show node "+node+" -o")
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "State="); ok {
			state = v
		}
	}
	if _, r, ok := strings.Cut(out, " Reason="); ok {
		reason, _, _ = strings.Cut(r, " [")
	}
	return state, strings.TrimSpace(reason)
}

// podsSnapshot is each pod of the cluster with its UID and container restarts: a pod that is
// replaced or restarted shows as a different line.
func (e *env) podsSnapshot() map[string]string {
	e.t.Helper()
	out := e.kubectlOK("get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance="+cluster, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {range .status.containerStatuses[*]}{.restartCount},{end}{"\n"}{end}`)
	snap := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, rest, ok := strings.Cut(line, " "); ok {
			snap[name] = rest
		}
	}
	return snap
}

// syncBuffer is a bytes.Buffer that a running command writes to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
