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
	"strings"
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

// hostVolume is the folder of one hostPath volume of hack/demo/storage.yaml (jail,
// controller-spool, worker-spool-N), which hack/demo.sh puts in the node's folder.
func hostVolume(name string) string { return filepath.Join(nodeDir(), "volumes", name) }

// nodeDir is hack/node.sh's folder.
func nodeDir() string {
	if dir := os.Getenv("NODE_DIR"); dir != "" {
		return filepath.Clean(dir)
	}
	return "/tmp/slurm-operator-node"
}

// lockNode holds the node's lock until the test ends: the node is one per machine (its
// folder, bridge, ports and iptables chains are fixed), so a second run on the same machine
// waits for the first instead of taking its node down under it.
func lockNode(t testing.TB) {
	f, err := os.OpenFile(nodeDir()+".lock", os.O_CREATE|os.O_RDWR, 0o600)
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

// newEnv is the env of a node test, before anything runs: it skips without NODE_TEST and
// needs root.
func newEnv(t testing.TB, nodeEnv []string) *env {
	if os.Getenv("NODE_TEST") == "" {
		t.Skip("set NODE_TEST=1 (make test does) to run on a real node; it needs root")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the node test needs root")
	}
	// hack/demo.sh: the test holds the node's lock; the demo's own settings are the test's.
	nodeEnv = append(nodeEnv, "NODE_LOCK_HELD=1", "DEMO_MODE=", "DEMO_FLAGS=")
	e := &env{t: t, nodeEnv: nodeEnv}
	e.root, _ = filepath.Abs(filepath.Join("..", ".."))
	e.assets = strings.TrimSpace(e.sh("", "hack/test-assets.sh", "--print-dir"))
	return e
}

// holdNode takes the node's lock and, when the test ends, dumps what explains a failure and
// takes the node down (unless NODE_KEEP is set).
func (e *env) holdNode() {
	t := e.t
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
}

// makeKey makes root's key and an ssh_config that uses it. hack/demo.sh gives the cluster the
// key from DEMO_KEY.pub and logs in with DEMO_KEY.
func (e *env) makeKey() {
	t := e.t
	e.key = filepath.Join(t.TempDir(), "id_ed25519")
	e.pub = writeKey(t, e.key)
	if err := os.WriteFile(e.key+".pub", []byte(e.pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.nodeEnv = append(e.nodeEnv, "DEMO_KEY="+e.key)
	e.sshConfig = filepath.Join(t.TempDir(), "ssh_config")
	writeSSHConfig(t, e.sshConfig, e.key)
}

// startDemo runs make demo's own entry point, hack/demo.sh up, as the test's set-up: the
// images, the node, the claims and the database, the operator chart, helm-slurm-cluster with
// hack/demo/values.yaml (DEMO_VALUES empty: the two login nodes the test uses, where the demo
// has one), and the stand-in nvidia-smi. It returns the env and what the demo printed.
func startDemo(t testing.TB) (*env, string) {
	e := newEnv(t, []string{"DEMO_VALUES="})
	// The images alone first, with their own time limit (a cold build is long); up finds them
	// built.
	e.sh("", "hack/images.sh")
	e.makeKey()
	e.holdNode()
	e.kubeconfig = filepath.Join(nodeDir(), "admin.kubeconfig")
	out := e.sh("", "hack/demo.sh", "up")
	t.Logf("hack/demo.sh up:\n%s", out)
	e.login = strings.TrimSpace(e.kubectlOK("get", "service", cluster+"-login", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
	return e, out
}

// startNode builds the images, starts the node (torn down when the test ends, unless
// NODE_KEEP is set) and imports the images; it returns the env with root's key made. nodeEnv
// are hack/node.sh's settings (NODE_WORKERS=2 for worker nodes).
func startNode(t testing.TB, nodeEnv ...string) *env {
	e := newEnv(t, nodeEnv)

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
	e.holdNode()
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
	e.makeKey()
	return e
}

// installAll does the document's section 2.1 on the node as make demo does (hack/demo.sh
// install): the claims and the database, the operator chart, then helm-slurm-cluster with the
// node test's values (hack/demo/values.yaml, then the files in values, under
// test/node/testdata), until Available; it notes the login Service's address.
func (e *env) installAll(values ...string) {
	e.t.Helper()
	e.sh("", append([]string{"hack/demo.sh", "install"}, e.testdata(values)...)...)
	e.login = strings.TrimSpace(e.kubectlOK("get", "service", cluster+"-login", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
}

// installCluster installs helm-slurm-cluster as make demo does (hack/demo.sh cluster) with
// root's key, waits until the cluster is Available, and notes the login Service's address.
func (e *env) installCluster(values ...string) {
	e.t.Helper()
	e.sh("", append([]string{"hack/demo.sh", "cluster"}, e.testdata(values)...)...)
	e.login = strings.TrimSpace(e.kubectlOK("get", "service", cluster+"-login", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
}

func (e *env) testdata(files []string) []string {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(e.root, "test/node/testdata", f)
	}
	return paths
}

// installStandInNvidiaSMI puts the stand-in nvidia-smi (hack/demo/nvidia-smi) in the shared
// root as make demo does, and waits until the health checks have lifted the drains they set
// without it.
func (e *env) installStandInNvidiaSMI() {
	e.t.Helper()
	e.sh("", "hack/demo.sh", "gpus")
}

// setSize sets the worker size as kubectl edit would.
func (e *env) setSize(n int) {
	e.t.Helper()
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"slurmNodes":{"worker":{"size":%d}}}}`, n))
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

// waitFor polls cond until it holds, failing with its last words after timeout. A wait of more
// than 15 s is logged with its length: the node tests' time goes mostly to such waits.
func (e *env) waitFor(timeout time.Duration, what string, cond func() (bool, string)) {
	e.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var last string
	for {
		ok, words := cond()
		if ok {
			if took := time.Since(start); took > 15*time.Second {
				e.t.Logf("waited %.0fs for %s", took.Seconds(), what)
			}
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
