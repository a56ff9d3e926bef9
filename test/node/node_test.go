// Package node runs the product on a real one-node Kubernetes (hack/node.sh): the images built
// by hack/images.sh, the operator installed with its Helm chart, and a SlurmCluster whose users
// log in with ssh and run jobs. It needs root; `make test` runs it with NODE_TEST=1.
package node

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

const ns = "slurm-test"

// env is the running node and what the test made.
type env struct {
	t          *testing.T
	root       string
	assets     string
	kubeconfig string
	key        string
}

func TestSlurmClusterOnARealNode(t *testing.T) {
	if os.Getenv("NODE_TEST") == "" {
		t.Skip("set NODE_TEST=1 (make test does) to run the node test; it needs root")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the node test needs root")
	}
	e := &env{t: t}
	e.root, _ = filepath.Abs(filepath.Join("..", ".."))
	e.assets = strings.TrimSpace(e.sh("", "hack/test-assets.sh", "--print-dir"))

	// Images first: a failed build should not leave a node behind.
	var layouts []string
	for _, line := range strings.Split(strings.TrimSpace(e.sh("", "hack/images.sh")), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			layouts = append(layouts, f[1])
		}
	}
	if len(layouts) < 8 {
		t.Fatalf("hack/images.sh built %d images, want 8", len(layouts))
	}
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
	e.sh("", append([]string{"hack/node.sh", "import"}, layouts...)...)

	t.Run("the operator installs with its Helm chart", func(t *testing.T) {
		e.helm("install", "slurm-operator", filepath.Join(e.root, "charts/slurm-operator"),
			"-n", "slurm-system", "--create-namespace", "--set", "image.pullPolicy=Never", "--wait", "--timeout", "5m")
	})

	e.key = filepath.Join(t.TempDir(), "id_ed25519")
	pub := writeKey(t, e.key)
	e.kubectlIn(clusterManifests(pub), "apply", "-f", "-")

	if !t.Run("the cluster becomes Available", func(t *testing.T) {
		e.waitFor(15*time.Minute, "SlurmCluster Available", func() (bool, string) {
			out, _ := e.kubectl("get", "slurmcluster", "node", "-n", ns, "-o",
				`jsonpath={range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}`)
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "Available=True ") {
					return true, out
				}
			}
			return false, out
		})
	}) {
		t.FailNow()
	}

	login := strings.TrimSpace(e.kubectlOK("get", "service", "node-login", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))

	t.Run("root logs in to the login Service with a key from sshRootPublicKeys", func(t *testing.T) {
		out := e.ssh(login, "id -un; hostname; cat /etc/os-release | grep VERSION_CODENAME")
		for _, want := range []string{"root\n", "node-login-0\n", "VERSION_CODENAME=trixie"} {
			if !strings.Contains(out, want) {
				t.Errorf("want %q in:\n%s", want, out)
			}
		}
	})

	t.Run("a login session is not privileged: a bounded capability set, no host devices", func(t *testing.T) {
		out := e.ssh(login, "grep CapBnd /proc/self/status | cut -f2; ls /dev | tr '\\n' ' '")
		capHex, devs, _ := strings.Cut(out, "\n")
		bnd, err := strconv.ParseUint(strings.TrimSpace(capHex), 16, 64)
		if err != nil {
			t.Fatalf("CapBnd: %v in:\n%s", err, out)
		}
		// A privileged container keeps every capability the node has, NET_ADMIN (12),
		// SYS_MODULE (16) and SYS_RAWIO (17) among them, and sees the node's disks.
		for _, c := range []uint{12, 16, 17} {
			if bnd&(1<<c) != 0 {
				t.Errorf("capability %d is in the login session's bounding set %x", c, bnd)
			}
		}
		if strings.Contains(devs, "vda") || strings.Contains(devs, "nvidia0") {
			t.Errorf("the login session sees the node's devices: %s", devs)
		}
	})

	t.Run("sinfo shows both workers idle", func(t *testing.T) {
		e.waitFor(3*time.Minute, "both workers idle", func() (bool, string) {
			out, _ := e.sshErr(login, "sinfo -h -N -o '%N %t' | sort -u")
			return strings.TrimSpace(out) == "worker-0 idle\nworker-1 idle", out
		})
	})

	t.Run("srun -N2 hostname runs on both workers", func(t *testing.T) {
		out := e.ssh(login, "srun -N2 hostname | sort")
		if strings.TrimSpace(out) != "node-worker-0\nnode-worker-1" {
			t.Fatalf("srun -N2 hostname:\n%s", out)
		}
	})

	t.Run("a two-step batch job is COMPLETED in sacct with its exit code", func(t *testing.T) {
		out := e.ssh(login, `cat > /root/two-steps.sh <<'JOB'
#!/bin/bash
#SBATCH -N2 -J two-steps -o /root/two-steps.out
srun -N2 hostname
srun -N1 sh -c 'exit 0'
JOB
sbatch --parsable --wait /root/two-steps.sh`)
		id := strings.TrimSpace(lastLine(out))
		e.waitFor(2*time.Minute, "job "+id+" in sacct", func() (bool, string) {
			acct, _ := e.sshErr(login, "sacct -n -P -j "+id+" -o JobID,JobName,State,ExitCode")
			return strings.Contains(acct, id+"|two-steps|COMPLETED|0:0") &&
				strings.Contains(acct, id+".0|hostname|COMPLETED|0:0") &&
				strings.Contains(acct, id+".1|sh|COMPLETED|0:0"), acct
		})
	})

	t.Run("srun --gres=gpu:1 sees its device", func(t *testing.T) {
		out := e.ssh(login, `srun -N1 --gres=gpu:1 sh -c 'echo "visible=$CUDA_VISIBLE_DEVICES"; ls /dev/nvidia0'`)
		if !strings.Contains(out, "visible=0") || !strings.Contains(out, "/dev/nvidia0") {
			t.Fatalf("a GPU job does not see its device:\n%s", out)
		}
	})

	t.Run("a file under /usr/local on worker-0 is seen on worker-1 and the login node", func(t *testing.T) {
		stamp := fmt.Sprint(time.Now().UnixNano())
		e.ssh(login, "srun -w worker-0 sh -c 'echo "+stamp+" > /usr/local/share/written-on-worker-0'")
		if out := e.ssh(login, "srun -w worker-1 cat /usr/local/share/written-on-worker-0"); strings.TrimSpace(out) != stamp {
			t.Errorf("worker-1 reads %q, want %q", out, stamp)
		}
		if out := e.ssh(login, "cat /usr/local/share/written-on-worker-0"); strings.TrimSpace(out) != stamp {
			t.Errorf("the login node reads %q, want %q", out, stamp)
		}
	})

	t.Run("jobs get the sized /dev/shm, the pod's DNS and slurmd's locked-memory limit", func(t *testing.T) {
		// The login shell's locked-memory limit is lowered: the job must get slurmd's (RDMA).
		// slurmd raises its own to unlimited where the container may (CAP_SYS_RESOURCE, which a
		// privileged container has on a real node); this nested node may not, so the check is
		// that the job's limit is slurmd's and not the shell's.
		out := e.ssh(login, "ulimit -l 64; srun -N1 sh -c 'df -k --output=size /dev/shm | tail -1; getent hosts node-controller-0 >/dev/null && echo resolves; ulimit -l'")
		f := strings.Fields(out)
		if len(f) < 3 || f[0] != "1048576" || f[1] != "resolves" || f[2] == "64" {
			t.Fatalf("want a 1 GiB /dev/shm, the controller's name resolved in the jail and slurmd's locked-memory limit (not the shell's 64 KiB), got:\n%s", out)
		}
		t.Logf("a job's locked-memory limit: %s", f[2])
	})

	t.Run("a root key added with kubectl patch lets root in without a restart, and open sessions go on", func(t *testing.T) {
		before := e.kubectlOK("get", "pod", "node-login-0", "-n", ns, "-o", `jsonpath={.metadata.uid} {.status.containerStatuses[?(@.name=="sshd")].restartCount}`)
		// An ssh session opened before the change, waiting for a line on its stdin.
		session := exec.Command("ssh", sshArgs(e.key, "root@"+login, "read line; echo still-here-$line")...)
		in, err := session.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var sessionOut bytes.Buffer
		session.Stdout, session.Stderr = &sessionOut, &sessionOut
		if err := session.Start(); err != nil {
			t.Fatal(err)
		}
		second := filepath.Join(t.TempDir(), "second")
		pub := writeKey(t, second)
		e.kubectlOK("patch", "slurmcluster", "node", "-n", ns, "--type=json",
			"-p", fmt.Sprintf(`[{"op":"add","path":"/spec/slurmNodes/login/sshRootPublicKeys/-","value":%q}]`, pub))
		// The kubelet updates the mounted ConfigMap within its sync period (about a minute).
		e.waitFor(4*time.Minute, "the second key lets root in", func() (bool, string) {
			out, err := e.sshAs(second, "root@"+login, "id -un")
			return err == nil && strings.TrimSpace(out) == "root", out
		})
		if after := e.kubectlOK("get", "pod", "node-login-0", "-n", ns, "-o", `jsonpath={.metadata.uid} {.status.containerStatuses[?(@.name=="sshd")].restartCount}`); after != before {
			t.Errorf("the login pod restarted: %q, then %q", before, after)
		}
		_, _ = io.WriteString(in, "yes\n")
		_ = in.Close()
		if err := session.Wait(); err != nil || !strings.Contains(sessionOut.String(), "still-here-yes") {
			t.Errorf("the open session did not survive: %v %s", err, sessionOut.String())
		}
	})

	t.Run("a user added with adduser logs in with their own key and runs srun -N2 as themselves", func(t *testing.T) {
		key := filepath.Join(t.TempDir(), "alice")
		pub := writeKey(t, key)
		e.ssh(login, fmt.Sprintf(`adduser --disabled-password --comment "" alice >/dev/null &&
install -d -m 0700 -o alice -g alice /home/alice/.ssh &&
echo %q > /home/alice/.ssh/authorized_keys && chown alice:alice /home/alice/.ssh/authorized_keys && chmod 0600 /home/alice/.ssh/authorized_keys`, pub))
		out, err := e.sshAs(key, "alice@"+login, `id -un; srun -N2 sh -c 'echo "$(id -un) $(hostname) $HOME $(stat -c %U $HOME)"' | sort`)
		if err != nil {
			t.Fatalf("alice: %v\n%s", err, out)
		}
		want := "alice\nalice node-worker-0 /home/alice alice\nalice node-worker-1 /home/alice alice"
		if strings.TrimSpace(out) != want {
			t.Fatalf("alice's session and jobs:\n%s\nwant:\n%s", out, want)
		}
	})

	t.Run("a stopping worker drains, lets its job finish, and takes jobs again when back", func(t *testing.T) {
		id := strings.TrimSpace(e.ssh(login, "sbatch --parsable -w worker-1 -J outlive --wrap 'sleep 25'"))
		e.waitFor(time.Minute, "job "+id+" running", func() (bool, string) {
			out, _ := e.sshErr(login, "squeue -h -j "+id+" -o %T")
			return strings.TrimSpace(out) == "RUNNING", out
		})
		e.kubectlOK("delete", "pod", "node-worker-1", "-n", ns, "--wait=false")
		e.waitFor(time.Minute, "worker-1 draining with the pod's reason", func() (bool, string) {
			out, _ := e.sshErr(login, "scontrol show node worker-1 -o")
			return strings.Contains(out, "DRAIN") && strings.Contains(out, "Reason="+slurmfacts.DrainPodStopping), out
		})
		e.waitFor(5*time.Minute, "job "+id+" COMPLETED", func() (bool, string) {
			out, _ := e.sshErr(login, "sacct -n -P -X -j "+id+" -o State,ExitCode")
			return strings.TrimSpace(out) == "COMPLETED|0:0", out
		})
		e.waitFor(5*time.Minute, "worker-1 idle again", func() (bool, string) {
			out, _ := e.sshErr(login, "sinfo -h -n worker-1 -o %t")
			return strings.TrimSpace(out) == "idle", out
		})
	})
}

// clusterManifests are what an admin applies: the storage (static volumes on the node), an
// external MariaDB with its Secret, and the SlurmCluster.
func clusterManifests(pub string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s-jail}
spec:
  capacity: {storage: 20Gi}
  accessModes: [ReadWriteMany]
  storageClassName: node-local
  hostPath: {path: /tmp/slurm-operator-node/volumes/jail, type: DirectoryOrCreate}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s-controller-spool}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  hostPath: {path: /tmp/slurm-operator-node/volumes/controller-spool, type: DirectoryOrCreate}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: jail-pvc, namespace: %[1]s}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: node-local
  resources: {requests: {storage: 20Gi}}
---
apiVersion: v1
kind: Secret
metadata: {name: slurm-db, namespace: %[1]s, labels: {slurm.hpc.dev/allow-reference: "true"}}
stringData: {password: node-test-password}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: mariadb, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: mariadb}}
  template:
    metadata: {labels: {app: mariadb}}
    spec:
      containers:
        - name: mariadb
          image: slurm-k8s-test/mariadb:11
          imagePullPolicy: Never
          env:
            - {name: MARIADB_DATABASE, value: slurm_acct_db}
            - {name: MARIADB_USER, value: slurm}
            - name: MARIADB_PASSWORD
              valueFrom: {secretKeyRef: {name: slurm-db, key: password}}
          ports: [{containerPort: 3306, name: mysql}]
          readinessProbe: {tcpSocket: {port: mysql}, periodSeconds: 2}
          resources: {requests: {cpu: 50m, memory: 128Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: mariadb, namespace: %[1]s}
spec:
  selector: {app: mariadb}
  ports: [{port: 3306, targetPort: mysql}]
---
apiVersion: slurm.hpc.dev/v1alpha1
kind: SlurmCluster
metadata: {name: node, namespace: %[1]s}
spec:
  clusterName: node
  volumeSources:
    - name: jail
      persistentVolumeClaim: {claimName: jail-pvc}
  populateJail:
    image: slurm-k8s/jail:24.11
  images:
    pullPolicy: Never
  slurmNodes:
    controller:
      resources: {requests: {cpu: 50m, memory: 128Mi}}
    worker:
      size: 2
      gpu: 1
      sharedMemorySize: 1Gi
      resources:
        requests: {cpu: 50m, memory: 256Mi}
        limits: {cpu: "1", memory: 3Gi}
      volumes:
        jail: {volumeSourceName: jail}
    login:
      size: 1
      resources: {requests: {cpu: 50m, memory: 128Mi}}
      sshRootPublicKeys: [%[2]q]
      volumes:
        jail: {volumeSourceName: jail}
    accounting:
      enabled: true
      resources: {requests: {cpu: 50m, memory: 128Mi}}
      externalDB:
        host: mariadb.%[1]s.svc.cluster.local
        user: slurm
        passwordSecretKeyRef: {name: slurm-db, key: password}
`, ns, pub)
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
