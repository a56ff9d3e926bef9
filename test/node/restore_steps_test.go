package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// checkRestoreFromABackup runs docs/backup.md's restore procedure on the live cluster, as an
// admin would with kubectl: a backup taken by the operator's backup Job, then restoreBackup. The
// job queued at the backup is queued again and the job finished before it is in sacct; the jobs
// that came after the backup are in neither.
func (e *env) checkRestoreFromABackup() {
	t := e.t
	t.Helper()
	before, queued, held, folder, _ := e.backupWithAQueuedJob("24.11-restore", "root")
	var queuedAfter string
	defer func() {
		// Held jobs left by a failure here would keep later steps from finding the queue empty.
		e.sshErr(e.login, strings.TrimSpace("scancel "+queued+" "+queuedAfter))
	}()

	after := strings.TrimSpace(e.onLogin("sbatch --parsable -J after-backup --wrap true"))
	queuedAfter = strings.TrimSpace(e.onLogin("sbatch --parsable -J queued-after-backup --hold --wrap true"))
	e.waitJobInSacct(after, "COMPLETED")

	e.restoreBackup(folder)
	e.waitFor(5*time.Minute, "slurmctld back with the backup's queue", func() (bool, string) {
		out, err := e.sshErr(e.login, "squeue -h -o '%i %j' | sort")
		return err == nil && strings.Contains(out, queued+" "+held), out
	})
	if out := e.onLogin("squeue -h -o '%i %j'"); strings.Contains(out, "queued-after-backup") {
		t.Errorf("the job queued after the backup (%s) is queued after the restore:\n%s", queuedAfter, out)
	}
	e.waitJobInSacct(before, "COMPLETED")
	if out, err := e.sshErr(e.login, "sacct -a -n -X -P -o JobID,JobName -S 2020-01-01 --name after-backup,before-backup"); err != nil ||
		strings.TrimSpace(out) != before+"|before-backup" {
		t.Errorf("sacct by name after the restore: %v\n%s (want the job before the backup alone: %s)", err, out, before)
	}
	e.onLogin("scancel " + queued)
	e.waitWorkersIdle()
}

// backupWithAQueuedJob runs a job to its end and holds another in the queue (named after to, so
// that no earlier job shares its name), then takes a backup with the operator's backup Job (its
// target and folder named by to) once slurmctld's saved job state holds the held job. It returns
// both jobs' ids, the held job's name, the backup's folder on the node and the cluster's
// clusterName. The jobs are user's, submitted from their own shell on the login node.
func (e *env) backupWithAQueuedJob(to, user string) (finished, queued, held, folder, clusterName string) {
	e.t.Helper()
	finished = strings.TrimSpace(e.onLogin(asUser(user, "sbatch --parsable -J before-backup --wrap true")))
	e.waitJobInSacct(finished, "COMPLETED")
	e.waitJobEnded(finished)
	held = "queued-at-" + to
	queued = strings.TrimSpace(e.onLogin(asUser(user, "sbatch --parsable -J "+held+" --hold --wrap true")))
	e.waitStateHolds(held)
	folder, clusterName = e.runBackupJob(to, "24.11", to)
	return finished, queued, held, folder, clusterName
}

// restoreBackup follows docs/backup.md's restore, steps 1 to 5, on the live cluster with
// kubectl: the backup's checksums; the operator stopped, then slurmdbd and slurmctld; the dump
// loaded into the (external) MariaDB with kubectl exec; the spool's files set aside and the
// backup's state copied in by a pod on the controller's node that mounts the spool's claim and
// the backup volume (reliability.md's pod, run as a Job would); the operator started again,
// which scales slurmdbd and slurmctld back to the spec. folder is the backup on the node, under
// hostVolume("upgrade-backup").
func (e *env) restoreBackup(folder string) {
	t := e.t
	t.Helper()
	// 1. The backup is whole.
	check := exec.Command("sha256sum", "--quiet", "-c", "SHA256SUMS")
	check.Dir = folder
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("the backup's checksums: %v\n%s", err, out)
	}
	backupVolume := hostVolume("upgrade-backup")
	inBackup, err := filepath.Rel(backupVolume, folder)
	if err != nil || strings.HasPrefix(inBackup, "..") {
		t.Fatalf("the backup %s is not on the backup volume %s", folder, backupVolume)
	}
	// Where the state goes, as docs/reliability.md finds it: the spool's claim and the node.
	where := strings.Fields(e.kubectlOK("get", "pod", cluster+"-controller-0", "-n", ns, "-o",
		`jsonpath={.spec.volumes[?(@.name=="spool")].persistentVolumeClaim.claimName} {.spec.nodeName}`))
	if len(where) != 2 {
		t.Fatalf("the controller pod's spool claim and node: %q", where)
	}
	claim, node := where[0], where[1]
	image := strings.TrimSpace(e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.spec.images.accounting}"))

	// 2. The operator stopped, then slurmdbd and slurmctld.
	operator := []string{"-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator"}
	replicas := strings.TrimSpace(e.kubectlOK(append([]string{"get", "deployment", "-o", "jsonpath={.items[0].spec.replicas}"}, operator...)...))
	e.kubectlOK(append([]string{"scale", "deployment", "--replicas=0"}, operator...)...)
	restarted := false
	defer func() {
		if !restarted {
			e.kubectl(append([]string{"scale", "deployment", "--replicas=" + replicas}, operator...)...)
		}
	}()
	e.waitFor(2*time.Minute, "the operator's pods gone", func() (bool, string) {
		out, _ := e.kubectl(append([]string{"get", "pods", "-o", "name"}, operator...)...)
		return strings.TrimSpace(out) == "", out
	})
	e.kubectlOK("scale", "statefulset", cluster+"-accounting", cluster+"-controller", "-n", ns, "--replicas=0")
	e.waitFor(3*time.Minute, "slurmdbd's and slurmctld's pods gone", func() (bool, string) {
		out, _ := e.kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance="+cluster, "-o", "name")
		return !strings.Contains(out, cluster+"-accounting-") && !strings.Contains(out, cluster+"-controller-"), out
	})
	// 3. The dump loaded (mariadb-dump writes DROP TABLE and CREATE TABLE before each table's
	// rows, so the tables are the backup's, whatever was written since).
	dump, err := os.ReadFile(filepath.Join(folder, "accounting.sql"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := e.run(ctx, string(dump), filepath.Join(e.assets, "kubectl"), "exec", "-i", "-n", ns, "deploy/mariadb", "--",
		"mariadb", "-u", "slurm", "-pnode-test-password", "slurm_acct_db"); err != nil {
		t.Fatalf("loading the dump: %v\n%s", err, out)
	}
	// 4. The state in place, by a pod with the claim and the backup mounted: the spool's files
	// set aside in the pod (they go with it), the backup's copied in with their owner.
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "spool-restore", "namespace": ns},
		"spec": map[string]any{
			"nodeName": node, "restartPolicy": "Never",
			"containers": []any{map[string]any{
				"name": "spool-restore", "image": image, "imagePullPolicy": "IfNotPresent",
				"command": []string{"sh", "-c", `set -e; cd /spool && mkdir -p /spool-old && find . -mindepth 1 -maxdepth 1 -exec mv -t /spool-old/ {} + && cp -a "/backup/$1/statesave/." .; ls -ln`, "restore", inBackup},
				"volumeMounts": []any{
					map[string]any{"name": "spool", "mountPath": "/spool"},
					map[string]any{"name": "backup", "mountPath": "/backup", "readOnly": true},
				},
			}},
			"volumes": []any{
				map[string]any{"name": "spool", "persistentVolumeClaim": map[string]any{"claimName": claim}},
				map[string]any{"name": "backup", "hostPath": map[string]any{"path": backupVolume, "type": "Directory"}},
			},
		},
	}
	manifest, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.run(ctx, string(manifest), filepath.Join(e.assets, "kubectl"), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the restore pod: %v\n%s", err, out)
	}
	defer e.kubectl("delete", "pod", "spool-restore", "-n", ns, "--wait=false")
	e.waitFor(2*time.Minute, "the restore pod Succeeded", func() (bool, string) {
		phase, _ := e.kubectl("get", "pod", "spool-restore", "-n", ns, "-o", "jsonpath={.status.phase}")
		if phase == "Failed" {
			logs, _ := e.kubectl("logs", "spool-restore", "-n", ns)
			t.Fatalf("the restore pod failed:\n%s", logs)
		}
		return phase == "Succeeded", phase
	})
	if st, err := os.Stat(filepath.Join(hostVolume("controller-spool"), "job_state")); err != nil {
		t.Fatalf("the restored spool: %v", err)
	} else if want, err := os.Stat(filepath.Join(folder, "statesave", "job_state")); err != nil || st.Size() != want.Size() {
		t.Fatalf("the restored job_state: %d bytes, the backup's: %v", st.Size(), want)
	}
	// 5. The operator again: it scales slurmdbd and slurmctld back to the spec.
	e.kubectlOK(append([]string{"scale", "deployment", "--replicas=" + replicas}, operator...)...)
	restarted = true
}

// asUser is script as run from user's own login shell (root's as it is); script holds no '.
func asUser(user, script string) string {
	if user == "root" {
		return script
	}
	return "su - " + user + " -c '" + script + "'"
}

// waitWorkersIdle waits until both workers take jobs.
func (e *env) waitWorkersIdle() {
	e.t.Helper()
	e.waitFor(3*time.Minute, "both workers idle", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sinfo -h -N -o '%N %t' | sort -u")
		return strings.TrimSpace(out) == "worker-0 idle\nworker-1 idle", out
	})
}

// waitJobEnded waits until slurmctld holds the job as ended (no longer completing on its nodes).
func (e *env) waitJobEnded(id string) {
	e.t.Helper()
	e.waitFor(time.Minute, "job "+id+" ended in slurmctld", func() (bool, string) {
		out, _ := e.sshErr(e.login, "scontrol show job "+id+" -o")
		return strings.Contains(out, "JobState=COMPLETED ") && !strings.Contains(out, "COMPLETING"), out
	})
}

// waitStateHolds waits until slurmctld's saved job state (StateSaveLocation's job_state, which
// slurmctld writes a few seconds after a change) holds a job of that name, as the file packs it.
// A backup copied before that would not bring the job back, and would bring back what changed
// before it as it was (a job ended before the named one was submitted could come back running).
// Waiting for any save after a time is not enough: the save the earlier change asked for can
// land after that time without the named job, as a restore into a new cluster once showed
// ("Purged files for defunct batch JobId": the job's script was in the copy, the job not).
func (e *env) waitStateHolds(name string) {
	e.t.Helper()
	state := filepath.Join(hostVolume("controller-spool"), "job_state")
	e.waitFor(time.Minute, "slurmctld's saved job state holding job "+name, func() (bool, string) {
		b, err := os.ReadFile(state)
		if err != nil {
			return false, err.Error()
		}
		return bytes.Contains(b, []byte(name)), fmt.Sprintf("%d bytes", len(b))
	})
}

// waitJobInSacct waits until sacct shows the job in the state (slurmdbd takes a moment).
func (e *env) waitJobInSacct(id, state string) {
	e.t.Helper()
	e.waitFor(2*time.Minute, "job "+id+" "+state+" in sacct", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sacct -n -X -P -o State -j "+id)
		return strings.TrimSpace(out) == state, out
	})
}
