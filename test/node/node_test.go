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
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
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

	t.Run("scheduled backups: the CronJob's Jobs run beside the controller pod and keep the newest, never the backup before an upgrade", func(t *testing.T) {
		e.with(t).checkScheduledBackups()
	})

	t.Run("restore from a backup as docs/backup.md says: the job queued at the backup is queued again, the one finished before it is in sacct, what came after is gone", func(t *testing.T) {
		e.with(t).checkRestoreFromABackup()
	})

	t.Run("each worker has the GPU Kubernetes gave its pod: the two workers' jobs see different devices", func(t *testing.T) {
		e := e.with(t)
		e.checkEachWorkersOwnGPU()
	})

	// 4.4, and 2.2 ("running the command once synchronizes the packages across all nodes").
	t.Run("the exporter runs from its image and, scraped through its Service, shows the node and job states sinfo and squeue show", func(t *testing.T) {
		e.with(t).checkExporterScrape()
	})

	t.Run("the exporter follows its token Secret through the kubelet without a restart: a broken token stops its reads, the operator's new one restores them", func(t *testing.T) {
		e.with(t).checkExporterFollowsItsToken()
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
		e.with(t).checkRootKeyPatch()
	})

	t.Run("a login pod that stops tells its ssh sessions, keeps them through the notice, and stops once the last one ended", func(t *testing.T) {
		e.with(t).checkLoginStopNotice()
	})

	t.Run("a user added with adduser logs in with their own key, has one home everywhere, runs srun -N2 as themselves and ssh's to worker-1", func(t *testing.T) {
		e := e.with(t)
		e.checkUserJobs()
	})

	var dir *directory
	t.Run("a directory server with users, groups and an SSH key runs in the namespace (slapd over TLS), and the admin's SSSD Secret names it", func(t *testing.T) {
		dir = e.with(t).startDirectory()
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
		// ssh.adminGroups and the directory (spec.identity) in the same change, so that the
		// workers roll once for all three.
		e.onLogin("addgroup --quiet hpc-admins && adduser --quiet alice hpc-admins")
		e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p",
			`{"spec":{"docker":{"enabled":true},`+identityPatch+`,"slurmNodes":{"worker":{"ssh":{"adminGroups":["hpc-admins"]}}}}}`)
		e.waitFor(6*time.Minute, "every worker replaced with dockerd, and idle", func() (bool, string) {
			names, _ := e.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=worker", "-o",
				`jsonpath={range .items[*]}{.metadata.name}:{.spec.containers[*].name}:{.status.containerStatuses[*].ready}{"\n"}{end}`)
			nodes, _ := e.sshErr(e.login, "sinfo -h -N -o '%N %t' | sort -u")
			return strings.Count(names, "dockerd") == 2 && !strings.Contains(names, "false") &&
				strings.TrimSpace(nodes) == "worker-0 idle\nworker-1 idle", names + nodes
		})
		// The same change rolls the controller and login pods for SSSD: sessions below need
		// the new login pods.
		e.waitSSSDInEveryPod()
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

	t.Run("users from the directory through SSSD: dana logs in with the key the directory holds, gets her home at first login, runs srun -N2 as herself with her groups; a partition for the group hpc runs her job and holds erin's; sacct names her", func(t *testing.T) {
		if dir == nil {
			t.Skip("no directory server")
		}
		e.with(t).checkDirectoryUsers(dir)
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
			// Podman's warnings (cgroup v1 on this node), and srun's own words when the job
			// waits a moment for its node ("queued and waiting for resources").
			if !strings.HasPrefix(l, "time=") && !strings.HasPrefix(l, "srun: ") {
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
		e.with(t).checkHealthDrainsFewerGPUs()
	})

	t.Run("a worker whose jail turns read-only, or runs short of space, is drained naming it and returns when mended", func(t *testing.T) {
		e.with(t).checkHealthDrainsBrokenJail()
	})

	// 4.2.
	t.Run("scale 2 → 3 while a job runs: worker-2 joins idle in seconds and nothing restarts", func(t *testing.T) {
		e.with(t).checkScaleUpWhileAJobRuns()
	})

	t.Run("an MPI all-reduce check on three workers drains worker-2 alone as the outlier while its pod's interface is throttled, and resumes it once mended", func(t *testing.T) {
		e.with(t).checkActiveCheckOutlier()
	})

	t.Run("scale 3 → 2 while a job runs on worker-2: drained, the job completes, then the node leaves sinfo and the StatefulSet shrinks", func(t *testing.T) {
		e.with(t).checkScaleDownWhileAJobRuns()
	})

	t.Run("a CPU-only node set joins a partition of its own beside the workers, runs a --constraint job, and leaves with its StatefulSet when removed; no other pod is touched", func(t *testing.T) {
		e.with(t).checkNodeSet()
	})

	t.Run("an elastic node set shows its two nodes powered down with no pod, runs a two-node job from zero on pods the operator makes, removes them once idle, and with no CPU left for its pod says why on the node until the CPU is freed, and with the namespace's pod quota spent says so on the node and in the status until it is lifted", func(t *testing.T) {
		e.with(t).checkElasticNodeSet()
	})

	t.Run("scale 2 → 4 → 2 where only three fit: worker-3 is reported Pending with the scheduler's reason, then both leave at once; the job on worker-1 completes", func(t *testing.T) {
		e.with(t).checkScalePastWhatFits()
	})

	t.Run("a stopping worker drains, lets its job finish, and takes jobs again when back; so does every worker after the controller pod is replaced, three times SlurmdTimeout later", func(t *testing.T) {
		e.with(t).checkStoppingWorkers()
	})

	t.Run("a worker stopped while slurmctld does not answer keeps its job until slurmctld is back, then drains, lets it finish and returns", func(t *testing.T) {
		e.with(t).checkWorkerStoppedWhileSlurmctldIsDown()
	})

	t.Run("the manager killed during a scale-up converges after its restart: no duplicates, the same keys", func(t *testing.T) {
		e.with(t).checkManagerKilledDuringAScaleUp()
	})

	// 4.3: "remount and recreate the jail-pvc on the new cluster, then follow the creation steps".
	t.Run("a slurmctld state file cut short stops slurmctld, which the status names through the kubelet; restored, slurmctld starts and the running job is still there", func(t *testing.T) {
		e.with(t).checkStateFileCutShort()
	})
	t.Run("delete the cluster and create it again as a new cluster on the same jail, with new keys, an empty database and spool, then restore the old one's backup into it: the jail, its users and files are kept, the queued job is queued again, the finished one is in sacct, new jobs get higher ids", func(t *testing.T) {
		e.with(t).checkRecreateAndRestore()
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
