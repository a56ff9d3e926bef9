package node

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// The recovery steps of the one-node test: stopping workers, slurmctld away, the manager
// killed, a damaged state file, and the cluster deleted and created again on its jail as a new
// cluster, restored from the old one's backup.

// checkStoppingWorkers: a stopping worker drains, lets its job finish, and takes jobs again when
// back; so does every worker after the controller pod is replaced, three times SlurmdTimeout later.
func (e *env) checkStoppingWorkers() {
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
}

// checkWorkerStoppedWhileSlurmctldIsDown: a worker stopped while slurmctld does not answer keeps
// its job until slurmctld is back, then drains, lets it finish and returns.
func (e *env) checkWorkerStoppedWhileSlurmctldIsDown() {
	t := e.t
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
}

// checkManagerKilledDuringAScaleUp: the manager killed during a scale-up converges after its
// restart: no duplicates, the same keys.
func (e *env) checkManagerKilledDuringAScaleUp() {
	t := e.t
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
	// headless one and the node names'; the Slurm config, root's keys and, with the directory
	// on (spec.identity, from its step on), the identity files; the busy workers' budget; the
	// node names' EndpointSlice.
	configMaps := 2
	if e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.spec.identity.sssd.configSecretName}") != "" {
		configMaps++
	}
	for kind, want := range map[string]int{"statefulset": 4, "deployment": 1, "service": 7, "configmap": configMaps, "poddisruptionbudget": 1} {
		out := e.kubectlOK("get", kind, "-n", ns, "-l", "app.kubernetes.io/instance="+cluster, "-o", "name")
		if got := len(strings.Fields(out)); got != want {
			t.Errorf("%d %s objects of the cluster, want %d:\n%s", got, kind, want, out)
		}
	}
	if out := e.kubectlOK("get", "endpointslice", "-n", ns, "-l", "endpointslice.kubernetes.io/managed-by=slurm-operator", "-o", "name"); len(strings.Fields(out)) != 1 {
		t.Errorf("the node names' EndpointSlices:\n%s", out)
	}
}

// checkStateFileCutShort: a slurmctld state file cut short stops slurmctld, which the status names
// through the kubelet; restored, slurmctld starts and the running job is still there.
func (e *env) checkStateFileCutShort() {
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
}

// checkRecreateAndRestore: the cluster deleted and made again on the same jail as a new cluster,
// with keys of its own, an empty database and an empty spool (as a site's new cluster would
// have), into which docs/backup.md's restore brings the old cluster's backup: the jail, its users
// and files are kept; the job queued at the backup is queued again with its id, the job finished
// before it is in sacct, and the new cluster's first job gets an id above both and runs.
func (e *env) checkRecreateAndRestore() {
	t := e.t
	marker := e.onLogin("cat /" + slurmfacts.JailMarkerFile)
	// The jobs are an ordinary user's: alice's, whom the jail keeps.
	finished, queued, held, folder, _ := e.backupWithAQueuedJob("24.11-new-cluster", "alice")
	defer func() { e.sshErr(e.login, "scancel "+queued) }()
	// The backup holds the job; the old cluster ends without it (root cancels it).
	e.onLogin("scancel " + queued)
	mungeKey := e.kubectlOK("get", "secret", cluster+"-munge-key", "-n", ns, "-o", "jsonpath={.data}")
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
	// A new cluster's database and spool are empty: the old ones emptied by hand (the spool's
	// files kept aside on the node).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := e.run(ctx, "", filepath.Join(e.assets, "kubectl"), "exec", "-n", ns, "deploy/mariadb", "--", "mariadb", "-u", "slurm",
		"-pnode-test-password", "-e", "DROP DATABASE slurm_acct_db; CREATE DATABASE slurm_acct_db"); err != nil {
		t.Fatalf("emptying the database: %v\n%s", err, out)
	}
	spool := hostVolume("controller-spool")
	if out, err := exec.Command("sh", "-c", `set -e; rm -rf "$1.old-cluster"; mkdir "$1.old-cluster"; find "$1" -mindepth 1 -maxdepth 1 -exec mv -t "$1.old-cluster" {} +`,
		"empty", spool).CombinedOutput(); err != nil {
		t.Fatalf("emptying the spool: %v\n%s", err, out)
	}

	e.installCluster() // a new login Service, so a new address
	if got := e.onLogin("cat /" + slurmfacts.JailMarkerFile); got != marker {
		t.Errorf("the jail was populated again: marker %q, then %q", marker, got)
	}
	if got := e.kubectlOK("get", "secret", cluster+"-munge-key", "-n", ns, "-o", "jsonpath={.data}"); got == mungeKey {
		t.Errorf("the new cluster has the old cluster's munge key")
	}
	if out := e.onLogin("squeue -h -o %i; sacct -a -n -X -P -o JobID -S 2020-01-01"); strings.TrimSpace(out) != "" {
		t.Fatalf("the new cluster's queue or accounting is not empty before the restore:\n%s", out)
	}

	e.restoreBackup(folder)
	// What alice sees from her own shell: her held job, her finished one.
	e.waitFor(5*time.Minute, "the new cluster's slurmctld with the backup's queue", func() (bool, string) {
		out, err := e.sshErr(e.login, `su - alice -c "squeue -h -o '%i %j %u %r'"`)
		return err == nil && strings.TrimSpace(out) == queued+" "+held+" alice JobHeldUser", out
	})
	e.waitJobInSacct(finished, "COMPLETED")
	if out, err := e.sshErr(e.login, `su - alice -c "sacct -n -X -P -o JobID,JobName,User -S 2020-01-01 --name before-backup"`); err != nil ||
		!strings.Contains(out+"\n", finished+"|before-backup|alice\n") {
		t.Errorf("alice's sacct after the restore into the new cluster: %v\n%s (want %s|before-backup|alice)", err, out, finished)
	}
	// Her job released by herself, and a new one of hers, both run.
	e.onLogin(asUser("alice", "scontrol release "+queued))
	e.waitJobInSacct(queued, "COMPLETED")
	next := strings.TrimSpace(e.onLogin(asUser("alice", "sbatch --parsable -J after-restore --wrap true")))
	if atoi(t, next) <= atoi(t, queued) || atoi(t, next) <= atoi(t, finished) {
		t.Errorf("the new cluster's first job got id %s, not above the restored jobs' %s and %s", next, finished, queued)
	}
	e.waitJobInSacct(next, "COMPLETED")
	e.waitWorkersIdle()
	if out := e.onLogin("id -un alice; srun -w worker-1 from-worker-0; cat /mnt/data-hps/from-worker-0 >/dev/null && echo kept"); !strings.HasPrefix(out, "alice\n") || !strings.HasSuffix(strings.TrimSpace(out), "kept") {
		t.Errorf("after the cluster was created again:\n%s", out)
	}
}
