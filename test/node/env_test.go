package node

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// env is the running node and what the test made.
type env struct {
	t          *testing.T
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
}

func writeKey(t *testing.T, path string) string {
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
		time.Sleep(3 * time.Second)
	}
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

// writeSSHConfig writes an ssh_config for the test's own ssh client: root's key, no host key
// records (the cluster's host keys are new to this machine), batch mode.
func writeSSHConfig(t *testing.T, path, key string) {
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
