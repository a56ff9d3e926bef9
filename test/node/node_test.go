// Package node runs the product on a real one-node Kubernetes (hack/node.sh) as the user
// document (slurm-on-fpt-cloud) tells an admin and their users to: the images built by
// hack/images.sh, the claims created first, the operator installed with its Helm chart, the
// cluster with helm-slurm-cluster and the document's values, then each of its workflows (users,
// SSH, jobs, scaling, the shared root and sub-mounts, health checks, self-healing, migration).
// docs/e2e.md maps the document's sections to these steps. TestSlurmClusterOnSeveralNodes
// (nodes_test.go) runs the workflows again on a three-node Kubernetes, then the faults only
// several nodes show. It needs root; `make test` runs it with NODE_TEST=1.
package node

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/metricstest"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/syncbuf"
)

// ns and cluster are the document's names: namespace fpt-hpc, Helm release and cluster fpt-hpc.
const (
	ns      = "fpt-hpc"
	cluster = "fpt-hpc"
)

func TestSlurmClusterOnARealNode(t *testing.T) {
	// 2.1, steps 1-4, as make demo does them.
	e, demo := startDemo(t)
	t.Run("make demo's steps install as the document says, each with its elapsed time, and end with how to log in; make demo-ssh runs srun -N2", func(t *testing.T) {
		e := e.with(t)
		out := e.kubectlOK("get", "slurmcluster", "-n", ns)
		if !strings.Contains(out, cluster) || !strings.Contains(out, "True") {
			t.Errorf("kubectl get slurmcluster:\n%s", out)
		}
		for _, step := range []string{"] images: ", "] node: ", "] storage: ", "] operator: ", "] cluster: Available", "] gpus: 2 workers idle", "] ready. Log in as root",
			"make demo-ssh", "ssh -i " + e.key + " root@" + e.login, "srun -N2 --gres=gpu:1 nvidia-smi -L", "export KUBECONFIG=" + e.kubeconfig} {
			if !strings.Contains(demo, step) {
				t.Errorf("hack/demo.sh up printed no %q", step)
			}
		}
		// The managers, in pods with the chart's rights, read the CRD Helm installed: it is at
		// their own revision, so they leave it as it is (test/e2e shows an upgrade).
		if logs := e.kubectlOK("logs", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "--tail=-1"); !strings.Contains(logs, "CRD slurmclusters.slurm.hpc.dev is at this manager's revision") {
			t.Errorf("the managers did not read the CRD's revision at start:\n%s", logs)
		}
		// What make demo-ssh runs, with a command instead of a terminal.
		got := e.sh("", "hack/demo.sh", "ssh", "srun -N2 hostname | sort")
		if want := cluster + "-worker-0\n" + cluster + "-worker-1"; strings.TrimSpace(got) != want {
			t.Errorf("hack/demo.sh ssh 'srun -N2 hostname': %q, want %q", got, want)
		}
	})
	t.Run("root logs in to the login Service with a key from sshRootPublicKeys", func(t *testing.T) {
		e := e.with(t)
		out := e.onLogin("id -un; hostname; cat /etc/os-release | grep VERSION_CODENAME")
		if !strings.Contains(out, "root\n") || !strings.Contains(out, "VERSION_CODENAME=trixie") ||
			(!strings.Contains(out, cluster+"-login-0\n") && !strings.Contains(out, cluster+"-login-1\n")) {
			t.Errorf("want root on a login node of trixie, got:\n%s", out)
		}
	})

	t.Run("slurmctld and slurmdbd run with the chart's PriorityClass, the workers and login nodes without", func(t *testing.T) {
		e := e.with(t)
		out := e.kubectlOK("get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance="+cluster,
			"-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.priorityClassName} {.spec.priority}{"\n"}{end}`)
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			controlPlane := strings.Contains(f[0], "-controller-") || strings.Contains(f[0], "-accounting-")
			if controlPlane && (len(f) != 3 || f[1] != "slurm-control-plane" || f[2] != "1000000") || !controlPlane && len(f) > 2 {
				t.Errorf("pod priorities:\n%s", out)
				break
			}
		}
	})

	t.Run("a login session is not privileged: a bounded capability set, no host devices", func(t *testing.T) {
		e := e.with(t)
		out := e.onLogin("grep CapBnd /proc/self/status | cut -f2; ls /dev | tr '\\n' ' '")
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
		// Docker is opt-in: by default no pod of the cluster runs the privileged dockerd.
		if out := e.kubectlOK("get", "pods", "-n", ns, "-o", "jsonpath={.items[*].spec.containers[*].name}"); strings.Contains(out, "dockerd") {
			t.Errorf("a pod runs dockerd by default: %s", out)
		}
	})

	// The node has no NVIDIA driver: a stand-in nvidia-smi, installed in the shared root from a
	// login node (make demo did), is what the health checks and jobs run on every worker.
	t.Run("a program removed from and installed in the shared root from a login node is what every worker runs", func(t *testing.T) {
		e := e.with(t)
		e.onLogin("rm /usr/local/bin/nvidia-smi")
		e.waitFor(time.Minute, "both workers drained by the health check without nvidia-smi", func() (bool, string) {
			var words []string
			drained := true
			for _, w := range []string{"worker-0", "worker-1"} {
				state, reason := e.slurmState(w)
				drained = drained && strings.Contains(state, "DRAIN") && strings.HasPrefix(reason, slurmfacts.DrainHealth)
				words = append(words, w+" "+state+" "+reason)
			}
			return drained, strings.Join(words, "\n")
		})
		e.installStandInNvidiaSMI()
	})

	// 4.6.
	t.Run("ssh -J through the login Service reaches login-1 and worker-1 by their Slurm names", func(t *testing.T) {
		e := e.with(t)
		e.checkSSHJump()
	})

	t.Run("the jail has no Slurm of its own: the login's and workers' Slurm is their images', shown at Slurm's paths, the controller's version", func(t *testing.T) {
		e := e.with(t)
		want := strings.TrimSpace(e.kubectlOK("exec", "-n", ns, cluster+"-controller-0", "-c", "slurmctld", "--", "slurmctld", "-V"))
		if !strings.HasPrefix(want, "slurm") {
			t.Fatalf("slurmctld -V: %q", want)
		}
		// dpkg in the jail knows no Slurm package; the commands are mounts from the pod's image.
		out := e.onLogin(`dpkg-query -W slurm-client slurmd 2>&1 | grep -c "no packages found"; srun --version; sinfo --version
findmnt -n -o TARGET /usr/bin/srun; findmnt -n -o TARGET /usr/lib/x86_64-linux-gnu/slurm-wlm`)
		wantLogin := "2\n" + want + "\n" + want + "\n/usr/bin/srun\n/usr/lib/x86_64-linux-gnu/slurm-wlm"
		if strings.TrimSpace(out) != wantLogin {
			t.Errorf("on the login node:\n%s\nwant:\n%s", out, wantLogin)
		}
		for _, w := range []string{"worker-0", "worker-1"} {
			out := e.kubectlOK("exec", "-n", ns, cluster+"-"+w, "-c", "slurmd", "--", "slurm-jail-exec", "--", "sh", "-c",
				`slurmd -V; findmnt -n -o TARGET /usr/sbin/slurmd-wlm; dpkg-query -W slurmd 2>&1 | grep -c "no packages found"`)
			if got := strings.TrimSpace(out); got != want+"\n/usr/sbin/slurmd-wlm\n1" {
				t.Errorf("on %s:\n%s\nwant the controller's %q, from the image's slurmd-wlm, and no slurmd package in the jail", w, out, want)
			}
		}
	})

	// 2.1, "Run checks", and 2.2.
	t.Run("srun --nodes=2 --gres=gpu:1 nvidia-smi -L lists one GPU on each worker", func(t *testing.T) {
		e := e.with(t)
		e.checkTwoNodeGPUs()
	})

	t.Run("salloc with --mem and --time gets that memory, time and GPU", func(t *testing.T) {
		e := e.with(t)
		out := e.onLogin(`salloc --nodes=1 --ntasks=1 --mem=1G --time=00:20:00 --gres=gpu:1 sh -c 'scontrol show job -o $SLURM_JOB_ID' 2>&1`)
		for _, want := range []string{"TimeLimit=00:20:00", "MinMemoryNode=1G", "gres/gpu=1", "JobState=RUNNING"} {
			if !strings.Contains(out, want) {
				t.Errorf("want %q in the allocation:\n%s", want, out)
			}
		}
	})

	t.Run("the minGPT-style sbatch trains on two nodes with srun and writes log.out; squeue, scontrol and sacct show it", func(t *testing.T) {
		e := e.with(t)
		e.checkMinGPT()
	})

	t.Run("srun starts a two-node MPI program over PMIx: mpi4py ranks 0 and 1 of 2 allreduce across the workers", func(t *testing.T) {
		e := e.with(t)
		e.checkMPI()
	})
	t.Run("a two-node srun's time from the login node, on one node", func(t *testing.T) { e.with(t).logTwoNodeStart("workers on one node") })

	t.Run("a two-step batch job is COMPLETED in sacct with its exit code", func(t *testing.T) {
		e := e.with(t)
		out := e.onLogin(`cat > /root/two-steps.sh <<'JOB'
#!/bin/bash
#SBATCH -N2 -J two-steps -o /root/two-steps.out
srun -N2 hostname
srun -N1 sh -c 'exit 0'
JOB
sbatch --parsable --wait /root/two-steps.sh`)
		id := strings.TrimSpace(lastLine(out))
		e.waitFor(2*time.Minute, "job "+id+" in sacct", func() (bool, string) {
			acct, _ := e.sshErr(e.login, "sacct -n -P -j "+id+" -o JobID,JobName,State,ExitCode")
			return strings.Contains(acct, id+"|two-steps|COMPLETED|0:0") &&
				strings.Contains(acct, id+".0|hostname|COMPLETED|0:0") &&
				strings.Contains(acct, id+".1|sh|COMPLETED|0:0"), acct
		})
	})

	t.Run("the backup Job before an upgrade, rendered from the live cluster, dumps the external database and copies slurmctld's state on the kubelet", func(t *testing.T) {
		e.with(t).checkUpgradeBackupJob()
	})

	t.Run("each worker has the GPU Kubernetes gave its pod: the two workers' jobs see different devices", func(t *testing.T) {
		e := e.with(t)
		e.checkEachWorkersOwnGPU()
	})

	// 4.4, and 2.2 ("running the command once synchronizes the packages across all nodes").
	t.Run("the exporter runs from its image and, scraped through its Service, shows the node and job states sinfo and squeue show", func(t *testing.T) {
		e := e.with(t)
		e.kubectlOK("rollout", "status", "deployment/"+cluster+"-exporter", "-n", ns, "--timeout=2m")
		addr := strings.TrimSpace(e.kubectlOK("get", "service", cluster+"-exporter", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
		job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-0 -c 1 --gres=gpu:1 --wrap 'sleep 120'"))
		defer e.onLogin("scancel " + job)
		e.waitFor(time.Minute, "job "+job+" running", func() (bool, string) {
			out, _ := e.sshErr(e.login, "squeue -h -j "+job+" -o %T")
			return strings.TrimSpace(out) == "RUNNING", out
		})
		// The exporter reuses answers for 10 s: look until it has seen the job.
		url := fmt.Sprintf("http://%s:%d/metrics", addr, slurmfacts.ExporterPort)
		e.waitFor(time.Minute, "the exporter agrees with sinfo and squeue", func() (bool, string) {
			m, err := metricstest.Scrape(&http.Client{Timeout: 20 * time.Second}, url)
			if err != nil {
				return false, err.Error()
			}
			sinfo, _ := e.sshErr(e.login, "sinfo -N -h -o '%N %t'")
			running, _ := e.sshErr(e.login, "squeue -h -t R -o %i | wc -l")
			states := m.NodeStates()
			report := fmt.Sprintf("sinfo:\n%sexporter: %v; running jobs: squeue %s, exporter %v; slurm_up %v, slurmdbd_up %v",
				sinfo, states, strings.TrimSpace(running), m.By("slurm_partition_jobs", "state")["running"], m["slurm_up{}"], m["slurm_slurmdbd_up{}"])
			lines := strings.Split(strings.TrimSpace(sinfo), "\n")
			// It reads as slurm-metrics, with the operator's token (the JWT key is not in its pod).
			if m["slurm_user_rpcs_total{user=slurm-metrics}"] == 0 {
				return false, report + "; no RPCs from slurm-metrics, the exporter's user"
			}
			if m["slurm_up{}"] != 1 || m["slurm_slurmdbd_up{}"] != 1 || len(states) != len(lines) ||
				fmt.Sprint(m.By("slurm_partition_jobs", "state")["running"]) != strings.TrimSpace(running) ||
				m.By("slurm_node_gpus_allocated", "node")["worker-0"] != 1 {
				return false, report
			}
			for _, l := range lines {
				f := strings.Fields(l)
				if st, _, _ := strings.Cut(states[f[0]], "/"); st != metricstest.SinfoState(f[1]) {
					return false, report
				}
			}
			return true, report
		})
	})

	t.Run("the exporter follows its token Secret through the kubelet without a restart: a broken token stops its reads, the operator's new one restores them", func(t *testing.T) {
		e := e.with(t)
		addr := strings.TrimSpace(e.kubectlOK("get", "service", cluster+"-exporter", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
		url := fmt.Sprintf("http://%s:%d/metrics", addr, slurmfacts.ExporterPort)
		pod := func() string {
			return strings.TrimSpace(e.kubectlOK("get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance="+cluster+",app.kubernetes.io/component=exporter",
				"-o", `jsonpath={range .items[*]}{.metadata.uid}/{.status.containerStatuses[0].restartCount}{" "}{end}`))
		}
		before := pod()
		up := func(want float64) func() (bool, string) {
			return func() (bool, string) {
				m, err := metricstest.Scrape(&http.Client{Timeout: 20 * time.Second}, url)
				if err != nil {
					return false, err.Error()
				}
				return m["slurm_up{}"] == want, fmt.Sprintf("slurm_up %v", m["slurm_up{}"])
			}
		}
		// The operator would mend the Secret at once: it is stopped while the token is broken.
		replicas := strings.TrimSpace(e.kubectlOK("get", "deployment", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "-o", "jsonpath={.items[0].spec.replicas}"))
		e.kubectlOK("scale", "deployment", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "--replicas=0")
		restored := false
		defer func() {
			if !restored {
				_, _ = e.kubectl("scale", "deployment", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "--replicas="+replicas)
			}
		}()
		e.waitFor(2*time.Minute, "the manager stopped", func() (bool, string) {
			out, _ := e.kubectl("get", "pods", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "-o", "name")
			return strings.TrimSpace(out) == "", out
		})
		e.kubectlOK("patch", "secret", cluster+"-exporter-token", "-n", ns, "--type", "merge", "-p", `{"stringData":{"token":"not-a-token"}}`)
		e.waitFor(4*time.Minute, "the exporter reads the broken token (slurm_up 0)", up(0))
		e.kubectlOK("scale", "deployment", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "--replicas="+replicas)
		restored = true
		e.waitFor(4*time.Minute, "the exporter reads the operator's new token (slurm_up 1)", up(1))
		if after := pod(); after != before || !strings.HasSuffix(after, "/0") {
			t.Errorf("the exporter pod (uid/restarts) was %q, is %q: it should neither be replaced nor restart", before, after)
		}
	})
	t.Run("NetworkPolicies, enforced: a login node's shell and a job reach slurmctld, and neither slurmrestd, the exporter nor the cloud metadata address, which slurmctld's pod reaches", func(t *testing.T) {
		e.with(t).checkNetworkPolicies()
	})
	t.Run("a worker that starts a job is protected from evictions within the operator's poll: the eviction API refuses it", func(t *testing.T) {
		e := e.with(t)
		busy := func() string {
			out, _ := e.kubectl("get", "pod", cluster+"-worker-1", "-n", ns, "-o", `jsonpath={.metadata.labels.slurm\.hpc\.dev/busy}`)
			return out
		}
		e.waitFor(time.Minute, "worker-1 labelled idle", func() (bool, string) { return busy() == "false", busy() })
		job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-1 -J protected --wrap 'sleep 300'"))
		defer func() {
			e.onLogin("scancel " + job)
			e.waitFor(time.Minute, "worker-1 idle again", func() (bool, string) {
				out, _ := e.sshErr(e.login, "sinfo -h -n worker-1 -o %t")
				return strings.TrimSpace(out) == "idle", out
			})
		}()
		e.waitJobState(job, "RUNNING")
		start := time.Now()
		// The operator's poll is 15 s: a label later than that (and a reconcile) means the
		// protection no longer follows jobs.
		e.waitFor(30*time.Second, "worker-1 labelled busy", func() (bool, string) { return busy() == "true", busy() })
		t.Logf("a job's start to its worker's protection from evictions: at most %.1fs (job seen running, then labelled)", time.Since(start).Seconds())
		eviction := fmt.Sprintf(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"%s-worker-1","namespace":"%s"}}`, cluster, ns)
		if out, err := e.run(t.Context(), eviction, filepath.Join(e.assets, "kubectl"), "create", "--raw", "/api/v1/namespaces/"+ns+"/pods/"+cluster+"-worker-1/eviction", "-f", "-"); err == nil || !strings.Contains(out, "disruption budget") {
			t.Errorf("the eviction of a worker running a job was not refused by its budget: %v\n%s", err, out)
		}
	})

	t.Run("a program installed from worker-0 runs on worker-1 and both login nodes; the sub-mount holds the same data everywhere", func(t *testing.T) {
		e := e.with(t)
		stamp := fmt.Sprint(time.Now().UnixNano())
		e.onLogin("srun -w worker-0 sh -c 'printf \"#!/bin/sh\\necho " + stamp + "\\n\" > /usr/local/bin/from-worker-0 && chmod 0755 /usr/local/bin/from-worker-0 && echo " + stamp + " > /mnt/data-hps/from-worker-0'")
		check := "mountpoint -q /mnt/data-hps && echo mounted; from-worker-0; cat /mnt/data-hps/from-worker-0"
		want := "mounted\n" + stamp + "\n" + stamp
		if out := e.onLogin("srun -w worker-1 sh -c '" + check + "'"); strings.TrimSpace(out) != want {
			t.Errorf("worker-1:\n%s\nwant:\n%s", out, want)
		}
		for _, node := range []string{"login-0", "login-1"} {
			if out, err := e.sshJump(node, check); err != nil || strings.TrimSpace(out) != want {
				t.Errorf("%s: %v\n%s\nwant:\n%s", node, err, out, want)
			}
		}
	})

	t.Run("jobs get the sized /dev/shm, the pod's DNS and slurmd's locked-memory limit", func(t *testing.T) {
		e := e.with(t)
		// The login shell's locked-memory limit is lowered: the job must get slurmd's (RDMA).
		// slurmd raises its own to unlimited where the container may (CAP_SYS_RESOURCE, which a
		// privileged container has on a real node); this nested node may not, so the check is
		// that the job's limit is slurmd's and not the shell's.
		out := e.onLogin("ulimit -l 64; srun -N1 sh -c 'df -k --output=size /dev/shm | tail -1; getent hosts " + cluster + "-controller-0 >/dev/null && echo resolves; ulimit -l'")
		f := strings.Fields(out)
		if len(f) < 3 || f[0] != "1048576" || f[1] != "resolves" || f[2] == "64" {
			t.Fatalf("want a 1 GiB /dev/shm, the controller's name resolved in the jail and slurmd's locked-memory limit (not the shell's 64 KiB), got:\n%s", out)
		}
		t.Logf("a job's locked-memory limit: %s", f[2])
	})

	// 4.1.
	t.Run("a root key added with kubectl patch lets root in at once without a restart, and open sessions go on", func(t *testing.T) {
		e := e.with(t)
		before := e.podsSnapshot()
		// An ssh session opened before the change, waiting for a line on its stdin.
		session := exec.Command("ssh", sshArgs(e.key, "root@"+e.login, "read line; echo still-here-$line")...)
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
		start := time.Now()
		e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json",
			"-p", fmt.Sprintf(`[{"op":"add","path":"/spec/slurmNodes/login/sshRootPublicKeys/-","value":%q}]`, pub))
		// The operator nudges the login pods, so their kubelet syncs the keys at once rather
		// than within its sync period. Both login nodes must take it (the Service picks one).
		for _, node := range []string{"login-0", "login-1"} {
			// Within 20 s: without the nudge it would take the kubelet's sync, about a minute.
			e.waitFor(20*time.Second, "the second key lets root in on "+node, func() (bool, string) {
				out, err := e.run(t.Context(), "", "ssh", "-F", e.sshConfig, "-J", "root@"+e.login, "-i", second, "root@"+node, "id -un")
				return err == nil && strings.TrimSpace(out) == "root", out
			})
		}
		t.Logf("a new root key works on both login nodes %.1fs after kubectl patch", time.Since(start).Seconds())
		if after := e.podsSnapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("pods were replaced or restarted:\n%v\nthen\n%v", before, after)
		}
		_, _ = io.WriteString(in, "yes\n")
		_ = in.Close()
		if err := session.Wait(); err != nil || !strings.Contains(sessionOut.String(), "still-here-yes") {
			t.Errorf("the open session did not survive: %v %s", err, sessionOut.String())
		}
	})

	t.Run("a login pod that stops tells its ssh sessions, keeps them through the notice, and stops once the last one ended", func(t *testing.T) {
		e := e.with(t)
		pod := cluster + "-login-1"
		// A session with a terminal on login-1 (reached through the login Service).
		session := exec.Command("ssh", "-tt", "-F", e.sshConfig, "-J", "root@"+e.login, "root@login-1", "echo session-up-on-$(hostname); sleep 600")
		var out syncbuf.Buffer
		session.Stdout, session.Stderr = &out, &out
		if err := session.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() { ended <- session.Wait() }()
		defer func() { _ = session.Process.Kill() }()
		// Its shell runs on login-1 (the jump's own connection may land there first).
		e.waitFor(30*time.Second, "the session on login-1", func() (bool, string) {
			return strings.Contains(out.String(), "session-up-on-"+pod), out.String()
		})
		uid := e.kubectlOK("get", "pod", "-n", ns, pod, "-o", "jsonpath={.metadata.uid}")
		deleted := time.Now()
		e.kubectlOK("delete", "pod", "-n", ns, pod, "--wait=false")
		e.waitFor(30*time.Second, "the notice on the session's terminal", func() (bool, string) {
			return strings.Contains(out.String(), "stops in 60 seconds"), out.String()
		})
		t.Logf("the session was told %.1fs after kubectl delete: %q", time.Since(deleted).Seconds(), strings.TrimSpace(out.String()))
		oldPod := func() bool {
			got, err := e.kubectl("get", "pod", "-n", ns, pod, "-o", "jsonpath={.metadata.uid}")
			return err == nil && strings.TrimSpace(got) == uid
		}
		// 10 s on, the pod still waits for its session, which still runs.
		time.Sleep(10 * time.Second)
		select {
		case err := <-ended:
			t.Fatalf("the session ended during the notice (%v):\n%s", err, out.String())
		default:
		}
		if !oldPod() {
			t.Fatalf("the pod stopped during the notice with a session open:\n%s", out.String())
		}
		// The user logs out: the pod stops at once, long before the 60 s are up.
		_ = session.Process.Kill()
		<-ended
		loggedOut := time.Now()
		e.waitFor(25*time.Second, "the old login-1 pod gone after its last session ended", func() (bool, string) {
			return !oldPod(), ""
		})
		t.Logf("the old pod was gone %.1fs after the last session ended (%.0fs after kubectl delete)", time.Since(loggedOut).Seconds(), time.Since(deleted).Seconds())
		e.waitFor(2*time.Minute, "login-1 back", func() (bool, string) {
			o, err := e.sshJump("login-1", "true")
			return err == nil, o
		})
	})

	t.Run("a user added with adduser logs in with their own key, has one home everywhere, runs srun -N2 as themselves and ssh's to worker-1", func(t *testing.T) {
		e := e.with(t)
		e.checkUserJobs()
	})

	// 4.5: Docker in the shared root; rootless Podman inside Slurm's limits.
	t.Run("a worker's /tmp is the node's sticky /tmp: a user's job cannot delete root's file there", func(t *testing.T) {
		e := e.with(t)
		e.onLogin(`srun -w worker-0 sh -c 'echo x > /tmp/root-owned && chmod 0666 /tmp/root-owned'`)
		out := e.onLogin(`su alice -c "cd && srun -w worker-0 sh -c 'stat -c %a /tmp; rm -f /tmp/root-owned 2>/dev/null; ls /tmp/root-owned'"`)
		if strings.TrimSpace(out) != "1777\n/tmp/root-owned" {
			t.Errorf("as alice in a job on worker-0: /tmp's mode, then root's file after rm -f:\n%s\nwant 1777 and the file kept", out)
		}
	})

	t.Run("Podman builds on a login node as a user; Docker, turned on, runs on workers only, replaced one drained node at a time, and every node takes jobs after three times SlurmdTimeout; an ssh admin group set with it lets its members in without a job", func(t *testing.T) {
		e := e.with(t)
		// No registry: an image from scratch with the jail's static busybox, built by alice.
		// su without "-" keeps the session's environment, where login nodes set Podman's storage.
		out, err := e.sshErr(e.login, `su alice -c 'set -e; cd; mkdir -p ~/hello; cp /bin/busybox ~/hello/
printf "FROM scratch\nCOPY busybox /bin/busybox\nENTRYPOINT [\"/bin/busybox\"]\n" > ~/hello/Dockerfile
podman build -q -t hello:1 ~/hello >/dev/null && podman save -o ~/hello.tar hello:1 && echo saved' 2>&1`)
		if err != nil || !strings.HasSuffix(strings.TrimSpace(out), "saved") {
			t.Fatalf("podman build and save as alice on a login node: %v\n%s", err, out)
		}
		// ssh.adminGroups in the same change, so that the workers roll once for both.
		e.onLogin("addgroup --quiet hpc-admins && adduser --quiet alice hpc-admins")
		e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p",
			`{"spec":{"docker":{"enabled":true},"slurmNodes":{"worker":{"ssh":{"adminGroups":["hpc-admins"]}}}}}`)
		e.waitFor(6*time.Minute, "every worker replaced with dockerd, and idle", func() (bool, string) {
			names, _ := e.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=worker", "-o",
				`jsonpath={range .items[*]}{.metadata.name}:{.spec.containers[*].name}:{.status.containerStatuses[*].ready}{"\n"}{end}`)
			nodes, _ := e.sshErr(e.login, "sinfo -h -N -o '%N %t' | sort -u")
			return strings.Count(names, "dockerd") == 2 && !strings.Contains(names, "false") &&
				strings.TrimSpace(nodes) == "worker-0 idle\nworker-1 idle", names + nodes
		})
		if out := e.kubectlOK("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=login", "-o", "jsonpath={.items[*].spec.containers[*].name}"); strings.Contains(out, "dockerd") {
			t.Errorf("a login pod runs dockerd: %s", out)
		}
		e.checkNodesHealAfterTimeout("worker-0", "worker-1")

		// alice, in an admin group now and with no job, is let in on a worker, outside any job.
		out, err = e.sshErr(e.login, `su - alice -c "ssh -o StrictHostKeyChecking=accept-new -o BatchMode=yes -o LogLevel=ERROR worker-1 'id -un; squeue -h -u alice -w worker-1 -o %i | wc -l; cat /proc/self/cgroup'" 2>&1`)
		if err != nil || !strings.HasPrefix(out, "alice\n0\n") || strings.Contains(out, "job_") {
			t.Errorf("alice, in ssh.adminGroups and with no job: ssh worker-1: %v\n%s", err, out)
		}
		e.onLogin("gpasswd -d alice hpc-admins >/dev/null")

		out = e.onLogin(`srun -N1 -w worker-1 --exclusive sh -c 'docker load -q -i /home/alice/hello.tar >/dev/null && docker run --rm localhost/hello:1 echo "docker on $(hostname)"'`)
		if strings.TrimSpace(out) != "docker on "+cluster+"-worker-1" {
			t.Errorf("docker run on worker-1:\n%s", out)
		}
		root := e.onLogin(`srun -N1 -w worker-1 docker info --format '{{.DockerRootDir}} {{len .Images}}'; echo "jail: $(ls -A /var/lib/docker | wc -l)"`)
		if !strings.Contains(root, "/var/lib/docker ") || strings.Contains(root, "/var/lib/docker 0") || !strings.Contains(root, "jail: 0") {
			t.Errorf("dockerd's data root (on the node) and the jail's /var/lib/docker (empty):\n%s", root)
		}
		if out := e.kubectlOK("exec", "-n", ns, cluster+"-worker-1", "-c", "dockerd", "--", "ls", "/slurm-operator/docker"); !strings.Contains(out, "image") {
			t.Errorf("the worker's emptyDir for Docker holds no data:\n%s", out)
		}
		if out := e.kubectlOK("exec", "-n", ns, cluster+"-worker-1", "-c", "dockerd", "--", "stat", "-c", "%a %U", "/run/docker"); strings.TrimSpace(out) != "755 root" {
			t.Errorf("dockerd's directory: %s, want 755 root", out)
		}
	})

	t.Run("rootless Podman in a job step stays in the step's cgroup: the container's CPU set, cgroup and GPU are the step's", func(t *testing.T) {
		e := e.with(t)
		// adduser gave alice subordinate ids, which rootless Podman maps her container's users to.
		if out := e.onLogin("grep -c '^alice:' /etc/subuid /etc/subgid"); strings.Count(out, ":1") != 2 {
			t.Fatalf("alice's subordinate ids:\n%s", out)
		}
		// What a step sees of itself: its uid, CPU set, cgroup (the cpuset one under cgroup v1)
		// and GPU; then the same from inside a container it starts (busybox's applets there).
		e.onLogin(`cat > /usr/local/bin/step-look <<'EOF'
B=; command -v grep >/dev/null || B=busybox
echo "$($B id -u) $($B grep Cpus_allowed_list /proc/self/status | $B cut -f2) $($B grep -E '^0::|cpuset' /proc/self/cgroup | $B head -1 | $B cut -d: -f3) gpu=$CUDA_VISIBLE_DEVICES"
EOF
chmod 755 /usr/local/bin/step-look`)
		out := e.onLogin(`su alice -c 'cd; srun -n1 -c1 --gres=gpu:1 sh -c "step-look; podman load -q -i ~/hello.tar >/dev/null && podman run --rm -v /usr/local/bin/step-look:/look:ro hello:1 sh /look"' 2>&1`)
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.HasPrefix(l, "time=") { // Podman's warnings (cgroup v1 on this node)
				lines = append(lines, l)
			}
		}
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "1000 ") || !strings.HasSuffix(lines[0], " gpu=0") || len(strings.Fields(lines[0])) != 4 ||
			!strings.Contains(lines[0], "/step_0") || strings.Join(strings.Fields(lines[1])[1:], " ") != strings.Join(strings.Fields(lines[0])[1:], " ") {
			t.Errorf("the step, then the container it started:\n%s\nwant the same CPU set, cgroup and GPU twice", out)
		}
	})

	// The periodic checks (slurm-node-health.sh) with the stand-in nvidia-smi.
	t.Run("a worker that sees fewer GPUs is drained by the health check and returns when they are back; an admin's drain stays", func(t *testing.T) {
		e := e.with(t)
		e.onLogin("mkdir -p /etc/stand-in-gpus && echo 0 > /etc/stand-in-gpus/" + cluster + "-worker-1")
		e.waitFor(time.Minute, "worker-1 drained by the health check", func() (bool, string) {
			state, reason := e.slurmState("worker-1")
			return strings.Contains(state, "DRAIN") && strings.HasPrefix(reason, slurmfacts.DrainHealth) && strings.Contains(reason, "0 of 1 GPUs visible"), state + " " + reason
		})
		e.onLogin("rm /etc/stand-in-gpus/" + cluster + "-worker-1")
		e.waitFor(time.Minute, "worker-1 back", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sinfo -h -n worker-1 -o %t")
			return strings.TrimSpace(out) == "idle", out
		})

		e.onLogin(`scontrol update nodename=worker-0 state=drain reason="admin: bad DIMM"`)
		e.onLogin("echo 0 > /etc/stand-in-gpus/" + cluster + "-worker-0")
		time.Sleep(25 * time.Second) // two check intervals
		if state, reason := e.slurmState("worker-0"); !strings.Contains(state, "DRAIN") || reason != "admin: bad DIMM" {
			t.Errorf("while failing its checks, the admin's drained worker-0 is %s %q", state, reason)
		}
		e.onLogin("rm /etc/stand-in-gpus/" + cluster + "-worker-0")
		time.Sleep(25 * time.Second)
		if state, reason := e.slurmState("worker-0"); !strings.Contains(state, "DRAIN") || reason != "admin: bad DIMM" {
			t.Errorf("once healthy, the admin's drained worker-0 is %s %q", state, reason)
		}
		e.onLogin("scontrol update nodename=worker-0 state=resume")
	})

	t.Run("a worker whose jail turns read-only, or runs short of space, is drained naming it and returns when mended", func(t *testing.T) {
		e := e.with(t)
		drained := func(node, why string) {
			e.waitFor(3*time.Minute, node+" drained: "+why, func() (bool, string) {
				state, reason := e.slurmState(node)
				return strings.Contains(state, "DRAIN") && strings.HasPrefix(reason, slurmfacts.DrainHealth) && strings.Contains(reason, why), state + " " + reason
			})
		}
		idle := func(node string) {
			e.waitFor(3*time.Minute, node+" back", func() (bool, string) {
				out, _ := e.sshErr(e.login, "sinfo -h -n "+node+" -o %t")
				return strings.TrimSpace(out) == "idle", out
			})
		}
		// The jail read-only where slurmd runs it (its own mount namespace, entered from the node).
		pid := strings.Fields(e.sh("", "pgrep", "-f", "slurmd -D -N worker-1 "))[0]
		remount := func(mode string) {
			e.sh("", "nsenter", "-t", pid, "-m", "--", "mount", "-o", "remount,bind,"+mode, "/")
		}
		remount("ro")
		drained("worker-1", "the jail is not writable")
		remount("rw")
		idle("worker-1")
		// Less free space than the spec wants: the kubelet brings the new check to the workers.
		e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", `{"spec":{"periodicChecks":{"jailMinFreeSpace":"100Pi"}}}`)
		drained("worker-0", "MiB free, less than 107374182400 MiB")
		e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/periodicChecks/jailMinFreeSpace"}]`)
		idle("worker-0")
		idle("worker-1")
	})

	// 4.2.
	t.Run("scale 2 → 3 while a job runs: worker-2 joins idle in seconds and nothing restarts", func(t *testing.T) {
		e := e.with(t)
		job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-0 -J long --wrap 'sleep 90'"))
		e.waitJobState(job, "RUNNING")
		before := e.podsSnapshot()
		start := time.Now()
		e.setSize(3)
		// Within 40 s (10 s at most measured): a wait for the kubelet's ConfigMap sync (about a
		// minute) or a node slurmctld dropped would exceed it.
		e.waitFor(40*time.Second, "worker-2 idle", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sinfo -h -n worker-2 -o %t")
			return strings.TrimSpace(out) == "idle", out
		})
		t.Logf("scale-up: kubectl patch to worker-2 idle in sinfo: %.1fs", time.Since(start).Seconds())
		if out := e.onLogin("squeue -h -j " + job + " -o %T; sacct -n -X -P -j " + job + " -o State"); !strings.HasPrefix(out, "RUNNING\n") {
			t.Errorf("the job that ran through the scale-up: %q", out)
		}
		after := e.podsSnapshot()
		for name, was := range before {
			if after[name] != was {
				t.Errorf("pod %s was replaced or restarted: %q, then %q", name, was, after[name])
			}
		}
		// The job holds worker-0's only CPU: end it, then use all three.
		e.onLogin("scancel " + job)
		e.waitFor(time.Minute, "worker-0 idle", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sinfo -h -n worker-0 -o %t")
			return strings.TrimSpace(out) == "idle", out
		})
		if out := e.onLogin("srun -N3 hostname 2>&1 | sort"); strings.TrimSpace(out) != cluster+"-worker-0\n"+cluster+"-worker-1\n"+cluster+"-worker-2" {
			t.Errorf("srun -N3 hostname:\n%s", out)
		}
	})

	t.Run("an MPI all-reduce check on three workers drains worker-2 alone as the outlier while its pod's interface is throttled, and resumes it once mended", func(t *testing.T) {
		e.with(t).checkActiveCheckOutlier()
	})

	t.Run("scale 3 → 2 while a job runs on worker-2: drained, the job completes, then the node leaves sinfo and the StatefulSet shrinks", func(t *testing.T) {
		e := e.with(t)
		job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-2 -J leaving --wrap 'sleep 20'"))
		e.waitJobState(job, "RUNNING")
		start := time.Now()
		e.setSize(2)
		e.waitFor(time.Minute, "worker-2 draining for the scale-down", func() (bool, string) {
			state, reason := e.slurmState("worker-2")
			return strings.Contains(state, "DRAIN") && reason == slurmfacts.DrainScaleDown, state + " " + reason
		})
		if out := e.kubectlOK("get", "statefulset", cluster+"-worker", "-n", ns, "-o", "jsonpath={.spec.replicas}"); out != "3" {
			t.Errorf("the StatefulSet shrank to %s while worker-2 runs a job", out)
		}
		e.waitFor(2*time.Minute, "job "+job+" COMPLETED", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+job+" -o State,ExitCode")
			return strings.TrimSpace(out) == "COMPLETED|0:0", out
		})
		ended := time.Now()
		e.waitFor(2*time.Minute, "worker-2 gone from sinfo and the StatefulSet at 2", func() (bool, string) {
			nodes, _ := e.sshErr(e.login, "sinfo -h -N -o '%N %t' | sort -u")
			replicas, _ := e.kubectl("get", "statefulset", cluster+"-worker", "-n", ns, "-o", "jsonpath={.spec.replicas}")
			return strings.TrimSpace(nodes) == "worker-0 idle\nworker-1 idle" && replicas == "2", nodes + replicas
		})
		t.Logf("scale-down: kubectl patch to the shrink %.1fs, of which %.1fs after the job ended", time.Since(start).Seconds(), time.Since(ended).Seconds())
		e.waitFor(2*time.Minute, "pod "+cluster+"-worker-2 gone", func() (bool, string) {
			out, _ := e.kubectl("get", "pod", cluster+"-worker-2", "-n", ns)
			return strings.Contains(out, "NotFound"), out
		})
	})

	t.Run("a CPU-only node set joins a partition of its own beside the workers, runs a --constraint job, and leaves with its StatefulSet when removed; no other pod is touched", func(t *testing.T) {
		e.with(t).checkNodeSet()
	})

	t.Run("scale 2 → 4 → 2 where only three fit: worker-3 is reported Pending with the scheduler's reason, then both leave at once; the job on worker-1 completes", func(t *testing.T) {
		e := e.with(t)
		job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-1 -J meanwhile --wrap 'sleep 45'"))
		e.waitJobState(job, "RUNNING")
		e.setSize(4)
		e.waitFor(time.Minute, "worker-3 reported as a pod that cannot start", func() (bool, string) {
			out, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="WorkersAvailable")].reason} {.status.conditions[?(@.type=="WorkersAvailable")].message}`)
			return strings.HasPrefix(out, "WorkerPodsPending ") && strings.Contains(out, "pod "+cluster+"-worker-3 (Slurm node worker-3) cannot start: Unschedulable: "), out
		})
		if out := e.kubectlOK("get", "events", "-n", ns, "--field-selector", "reason=WorkerPodPending", "-o", "jsonpath={.items[*].note}{.items[*].message}"); !strings.Contains(out, cluster+"-worker-3") {
			t.Errorf("no WorkerPodPending event names worker-3: %q", out)
		}
		start := time.Now()
		e.setSize(2)
		e.waitFor(time.Minute, "two workers, in sinfo and the StatefulSet", func() (bool, string) {
			nodes, _ := e.sshErr(e.login, "sinfo -h -N -o %N | sort -u")
			replicas, _ := e.kubectl("get", "statefulset", cluster+"-worker", "-n", ns, "-o", "jsonpath={.spec.replicas}")
			return strings.TrimSpace(nodes) == "worker-0\nworker-1" && replicas == "2", nodes + replicas
		})
		t.Logf("scale 4 → 2 past a Pending worker: %.1fs to two workers", time.Since(start).Seconds())
		e.waitFor(2*time.Minute, "job "+job+" COMPLETED", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+job+" -o State,ExitCode")
			return strings.TrimSpace(out) == "COMPLETED|0:0", out
		})
		e.waitFor(2*time.Minute, "pods "+cluster+"-worker-2 and -3 gone", func() (bool, string) {
			out, _ := e.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=worker", "-o", "name")
			return strings.TrimSpace(out) == "pod/"+cluster+"-worker-0\npod/"+cluster+"-worker-1", out
		})
	})

	t.Run("a stopping worker drains, lets its job finish, and takes jobs again when back; so does every worker after the controller pod is replaced, three times SlurmdTimeout later", func(t *testing.T) {
		e := e.with(t)
		id := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-1 -J outlive --wrap 'sleep 25'"))
		e.waitJobState(id, "RUNNING")
		e.kubectlOK("delete", "pod", cluster+"-worker-1", "-n", ns, "--wait=false")
		e.waitFor(time.Minute, "worker-1 draining with the pod's reason", func() (bool, string) {
			state, reason := e.slurmState("worker-1")
			return strings.Contains(state, "DRAIN") && reason == slurmfacts.DrainPodStopping, state + " " + reason
		})
		e.waitFor(5*time.Minute, "job "+id+" COMPLETED", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+id+" -o State,ExitCode")
			return strings.TrimSpace(out) == "COMPLETED|0:0", out
		})
		e.waitFor(5*time.Minute, "worker-1 idle again", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sinfo -h -n worker-1 -o %t")
			return strings.TrimSpace(out) == "idle", out
		})
		// The replaced controller has a new address: slurmd and the clients look its name up
		// again (they resolve it per connection), and slurmctld reads its state back.
		e.kubectlOK("delete", "pod", cluster+"-controller-0", "-n", ns)
		e.kubectlOK("wait", "pod", cluster+"-controller-0", "-n", ns, "--for=condition=Ready", "--timeout=3m")
		e.checkNodesHealAfterTimeout("worker-0", "worker-1")
	})

	t.Run("a worker stopped while slurmctld does not answer keeps its job until slurmctld is back, then drains, lets it finish and returns", func(t *testing.T) {
		e := e.with(t)
		id := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-1 -J unanswered --wrap 'sleep 50'"))
		e.waitJobState(id, "RUNNING")
		signal := func(sig string) {
			e.kubectlOK("exec", "-n", ns, cluster+"-controller-0", "-c", "slurmctld", "--", "sh", "-c",
				`for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = slurmctld ] && kill -`+sig+` ${p#/proc/}; done; true`)
		}
		signal("STOP")
		stopped := true
		defer func() {
			if stopped {
				signal("CONT")
			}
		}()
		e.kubectlOK("delete", "pod", cluster+"-worker-1", "-n", ns, "--wait=false")
		// Less than SlurmdTimeout, so that slurmctld, once it runs again, does not take its
		// nodes for dead: long enough for squeue and scontrol in the preStop to time out.
		time.Sleep(15 * time.Second)
		out, err := e.kubectl("exec", "-n", ns, cluster+"-worker-1", "-c", "slurmd", "--", "sh", "-c", "grep -lx slurmstepd /proc/[0-9]*/comm | wc -l")
		signal("CONT")
		stopped = false
		if err != nil || strings.TrimSpace(out) == "0" {
			t.Fatalf("15 s after the pod was deleted with slurmctld not answering, its job steps are gone: %v %s", err, out)
		}
		e.waitFor(time.Minute, "worker-1 draining with the pod's reason", func() (bool, string) {
			state, reason := e.slurmState("worker-1")
			return strings.Contains(state, "DRAIN") && reason == slurmfacts.DrainPodStopping, state + " " + reason
		})
		e.waitFor(3*time.Minute, "job "+id+" COMPLETED", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+id+" -o State,ExitCode")
			return strings.TrimSpace(out) == "COMPLETED|0:0", out
		})
		e.waitFor(5*time.Minute, "worker-1 idle again", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sinfo -h -n worker-1 -o %t")
			return strings.TrimSpace(out) == "idle", out
		})
	})

	t.Run("the manager killed during a scale-up converges after its restart: no duplicates, the same keys", func(t *testing.T) {
		e := e.with(t)
		keys := e.kubectlOK("get", "secret", "-n", ns, cluster+"-munge-key", cluster+"-ssh-host-keys", cluster+"-jwt-key", "-o", "jsonpath={range .items[*]}{.metadata.uid}{.data}{end}")
		e.setSize(3)
		e.kubectlOK("delete", "pod", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "--wait=false")
		e.waitFor(4*time.Minute, "worker-2 idle after the manager's restart", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sinfo -h -n worker-2 -o %t")
			return strings.TrimSpace(out) == "idle", out
		})
		if after := e.kubectlOK("get", "secret", "-n", ns, cluster+"-munge-key", cluster+"-ssh-host-keys", cluster+"-jwt-key", "-o", "jsonpath={range .items[*]}{.metadata.uid}{.data}{end}"); after != keys {
			t.Error("the key Secrets changed across the manager's restart")
		}
		// controller, worker, login, accounting; the exporter; their Services, the login's
		// headless one and the node names'; the Slurm config and root's keys; the busy workers' budget; the node
		// names' EndpointSlice.
		for kind, want := range map[string]int{"statefulset": 4, "deployment": 1, "service": 7, "configmap": 2, "poddisruptionbudget": 1} {
			out := e.kubectlOK("get", kind, "-n", ns, "-l", "app.kubernetes.io/instance="+cluster, "-o", "name")
			if got := len(strings.Fields(out)); got != want {
				t.Errorf("%d %s objects of the cluster, want %d:\n%s", got, kind, want, out)
			}
		}
		if out := e.kubectlOK("get", "endpointslice", "-n", ns, "-l", "endpointslice.kubernetes.io/managed-by=slurm-operator", "-o", "name"); len(strings.Fields(out)) != 1 {
			t.Errorf("the node names' EndpointSlices:\n%s", out)
		}
	})

	// 4.3: "remount and recreate the jail-pvc on the new cluster, then follow the creation steps".
	t.Run("a slurmctld state file cut short stops slurmctld, which the status names through the kubelet; restored, slurmctld starts and the running job is still there", func(t *testing.T) {
		e := e.with(t)
		job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-1 -c 1 --wrap 'sleep 600'"))
		defer func() { _, _ = e.sshErr(e.login, "scancel "+job) }()
		e.waitJobState(job, "RUNNING")
		// The spool claim is a hostPath volume of the node (hack/demo/storage.yaml). slurmctld saves its
		// state as it stops, so the file is cut while the new pod cannot be placed.
		state := filepath.Join(hostVolume("controller-spool"), "job_state")
		node := strings.TrimPrefix(strings.TrimSpace(e.kubectlOK("get", "nodes", "-o", "name")), "node/")
		e.kubectlOK("cordon", node)
		defer func() { _, _ = e.kubectl("uncordon", node) }()
		e.kubectlOK("delete", "pod", "-n", ns, cluster+"-controller-0", "--timeout=2m")
		e.sh("", "sh", "-c", fmt.Sprintf("cp -p %[1]s %[1]s.test-copy && head -c 64 %[1]s.test-copy > %[1]s", state))
		e.kubectlOK("uncordon", node)
		e.waitFor(4*time.Minute, "ControllerStateUnreadable in the status", func() (bool, string) {
			out, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].reason} {.status.conditions[?(@.type=="Available")].message}`)
			return strings.HasPrefix(out, "ControllerStateUnreadable ") && strings.Contains(out, cluster+"-controller-0") &&
				strings.Contains(out, "Incomplete job state save file"), out
		})
		e.sh("", "sh", "-c", fmt.Sprintf("cp -p %[1]s.test-copy %[1]s && rm %[1]s.test-copy", state))
		// The container's back-off: the next start reads the restored file.
		e.waitFor(6*time.Minute, "job "+job+" still running once slurmctld is back", func() (bool, string) {
			out, err := e.sshErr(e.login, "squeue -h -j "+job+" -o %T")
			return err == nil && strings.TrimSpace(out) == "RUNNING", out
		})
		e.waitFor(2*time.Minute, "Available again", func() (bool, string) {
			out, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
			return out == "True", out
		})
	})
	t.Run("delete the cluster and create it again on the same claims: the jail, its users and files are kept", func(t *testing.T) {
		e := e.with(t)
		marker := e.onLogin("cat /" + slurmfacts.JailMarkerFile)
		// Deleted while idle: a job cancelled by the step before may still be ending on its worker
		// (its extern step, PrologFlags=Contain), and a worker whose slurmctld is gone waits for
		// its job steps through its grace period (PreStopScript).
		e.waitFor(2*time.Minute, "no job left and every worker idle before the cluster is deleted", func() (bool, string) {
			jobs, err1 := e.sshErr(e.login, "squeue -h -o %i")
			nodes, err2 := e.sshErr(e.login, "sinfo -h -N -o '%N %t'")
			busy := strings.Contains(nodes, "alloc") || strings.Contains(nodes, "mix") || strings.Contains(nodes, "comp")
			return err1 == nil && err2 == nil && strings.TrimSpace(jobs) == "" && !busy, "jobs: " + jobs + "\nnodes: " + nodes
		})
		e.helm("uninstall", cluster, "-n", ns, "--wait", "--timeout", "5m")
		e.waitFor(5*time.Minute, "the cluster's pods gone", func() (bool, string) {
			out, _ := e.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance="+cluster, "-o", "name")
			return strings.TrimSpace(out) == "", out
		})
		claims := e.kubectlOK("get", "pvc", "-n", ns, "-o", "name")
		for _, want := range []string{"jail-pvc", "controller-spool-pvc", "jail-submount-mlperf-sd-pvc", "spool-" + cluster + "-worker-0"} {
			if !strings.Contains(claims, "persistentvolumeclaim/"+want+"\n") {
				t.Errorf("claim %s is gone after the cluster was deleted:\n%s", want, claims)
			}
		}
		e.installCluster() // a new login Service, so a new address
		if got := e.onLogin("cat /" + slurmfacts.JailMarkerFile); got != marker {
			t.Errorf("the jail was populated again: marker %q, then %q", marker, got)
		}
		e.waitFor(3*time.Minute, "both workers idle", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sinfo -h -N -o '%N %t' | sort -u")
			return strings.TrimSpace(out) == "worker-0 idle\nworker-1 idle", out
		})
		if out := e.onLogin("id -un alice; srun -w worker-1 from-worker-0; cat /mnt/data-hps/from-worker-0 >/dev/null && echo kept"); !strings.HasPrefix(out, "alice\n") || !strings.HasSuffix(strings.TrimSpace(out), "kept") {
			t.Errorf("after the cluster was created again:\n%s", out)
		}
	})
}

// waitJobState waits until squeue shows the job in that state.
func (e *env) waitJobState(id, state string) {
	e.t.Helper()
	e.waitFor(time.Minute, "job "+id+" "+state, func() (bool, string) {
		out, _ := e.sshErr(e.login, "squeue -h -j "+id+" -o %T")
		return strings.TrimSpace(out) == state, out
	})
}
