package node

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// checkUpgradeBackupJob: the backup Job the operator makes before a change of Slurm release,
// rendered by the operator's own function from the live SlurmCluster and run by the kubelet
// (the node's images hold one Slurm release, so no upgrade can start here): with a backup
// volume set in the spec, it dumps the external MariaDB through slurmdbd.conf's credentials and
// copies slurmctld's state from the controller's spool claim, both whole (checksums), past the
// NetworkPolicies and the hardened pod's few capabilities.
func (e *env) checkUpgradeBackupJob() {
	t := e.t
	t.Helper()
	b, clusterName := e.runBackupJob("node-test", "24.11", "24.11")
	if backups, _ := filepath.Glob(filepath.Join(hostVolume("upgrade-backup"), clusterName, "*-slurm-24.11-to-24.11")); len(backups) != 1 {
		t.Fatalf("backups: %v", backups)
	}
	dump, err := os.ReadFile(filepath.Join(b, "accounting.sql"))
	if err != nil {
		t.Fatal(err)
	}
	// The jobs sacct showed above are in it.
	if !strings.Contains(string(dump), "INSERT INTO `"+clusterName+"_job_table`") || !strings.Contains(string(dump), "-- Dump completed") {
		t.Errorf("the dump %s holds no job table rows or is cut short (%d bytes)", b, len(dump))
	}
	if _, err := os.Stat(filepath.Join(b, "statesave", "job_state")); err != nil {
		t.Errorf("slurmctld's state was not copied: %v", err)
	}
	check := exec.Command("sha256sum", "--quiet", "-c", "SHA256SUMS")
	check.Dir = b
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("the backup's checksums: %v\n%s", err, out)
	}
}

// runBackupJob runs the backup Job before an upgrade from release from to release to, rendered
// by the operator's own function from the live SlurmCluster with the upgrade-backup volume set
// in its spec, and returns the backup's folder on the node and the cluster's clusterName.
func (e *env) runBackupJob(target, from, to string) (folder, clusterName string) {
	t := e.t
	t.Helper()
	dir := hostVolume("upgrade-backup")
	var patch string
	if names, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.spec.volumeSources[*].name}"); !strings.Contains(" "+names+" ", " upgrade-backup ") {
		patch = `{"op":"add","path":"/spec/volumeSources/-","value":{"name":"upgrade-backup","hostPath":{"path":"` + dir + `","type":"DirectoryOrCreate"}}},`
	}
	patch = `[` + patch + `{"op":"add","path":"/spec/upgrades","value":{"backup":{"volumeSourceName":"upgrade-backup"}}}]`
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", patch)

	var sc slurmv1alpha1.SlurmCluster
	if err := json.Unmarshal([]byte(e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "json")), &sc); err != nil {
		t.Fatal(err)
	}
	sc = *base.WithDefaults(&sc)
	job, err := render.UpgradeBackupJob(&sc, render.UpgradeBackupParams{
		Target: target, From: from, To: to, Image: sc.Spec.Images.Accounting,
	})
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := e.run(ctx, string(manifest), filepath.Join(e.assets, "kubectl"), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the backup Job: %v\n%s", err, out)
	}
	defer e.kubectl("delete", "job", job.Name, "-n", ns, "--wait=false")
	e.waitFor(3*time.Minute, "the backup Job "+job.Name+" complete", func() (bool, string) {
		out, _ := e.kubectl("get", "job", job.Name, "-n", ns, "-o", "jsonpath={.status.succeeded} {.status.failed}")
		if strings.HasPrefix(out, "1 ") {
			return true, out
		}
		logs, _ := e.kubectl("logs", "-n", ns, "job/"+job.Name, "--tail=20")
		return false, out + "\n" + logs
	})
	backups, _ := filepath.Glob(filepath.Join(dir, sc.Spec.ClusterName, "*-slurm-"+from+"-to-"+to))
	if len(backups) == 0 {
		t.Fatalf("no backup *-slurm-%s-to-%s under %s", from, to, dir)
	}
	return backups[len(backups)-1], sc.Spec.ClusterName
}

// checkScheduledBackups: spec.backups set on the live cluster, every minute with keep: 1, to the
// volume the backup before an upgrade wrote to. The kube-controller-manager's CronJob controller
// starts the operator's Jobs, the scheduler places them beside the first controller pod (whose
// spool claim they mount), and after two whole scheduled backups only the newer is left, while
// the backup before the upgrade stays. Then spec.backups goes, and the CronJob with it.
func (e *env) checkScheduledBackups() {
	t := e.t
	t.Helper()
	dir := hostVolume("upgrade-backup")
	var patch string
	if names, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.spec.volumeSources[*].name}"); !strings.Contains(" "+names+" ", " upgrade-backup ") {
		patch = `{"op":"add","path":"/spec/volumeSources/-","value":{"name":"upgrade-backup","hostPath":{"path":"` + dir + `","type":"DirectoryOrCreate"}}},`
	}
	patch = `[` + patch + `{"op":"add","path":"/spec/backups","value":{"schedule":"* * * * *","volumeSourceName":"upgrade-backup","keep":1}}]`
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", patch)
	defer e.kubectl("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/backups"}]`)

	selector := "app.kubernetes.io/component=backup,app.kubernetes.io/instance=" + cluster
	start := time.Now()
	e.waitFor(4*time.Minute, "two scheduled backup Jobs complete", func() (bool, string) {
		out, _ := e.kubectl("get", "jobs", "-n", ns, "-l", selector, "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.succeeded} {.status.failed}{"\n"}{end}`)
		done := 0
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[1] == "1" {
				done++
			}
		}
		if done >= 2 {
			return true, out
		}
		logs, _ := e.kubectl("logs", "-n", ns, "-l", selector, "--tail=5")
		return false, out + "\n" + logs
	})
	t.Logf("scheduled backups: two Jobs complete %.0fs after spec.backups was set", time.Since(start).Seconds())
	// No third one while the folders are counted.
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", `{"spec":{"backups":{"suspend":true}}}`)
	e.waitFor(time.Minute, "the CronJob suspended and no backup Job running", func() (bool, string) {
		s, _ := e.kubectl("get", "cronjob", cluster+"-backup", "-n", ns, "-o", "jsonpath={.spec.suspend} {.status.active}")
		return strings.TrimSpace(s) == "true", s
	})

	clusterDir := filepath.Join(dir, strings.TrimSpace(e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.spec.clusterName}")))
	scheduled, _ := filepath.Glob(filepath.Join(clusterDir, "*-scheduled"))
	partial, _ := filepath.Glob(filepath.Join(clusterDir, "*-scheduled.partial"))
	upgrade, _ := filepath.Glob(filepath.Join(clusterDir, "*-slurm-24.11-to-24.11"))
	if len(scheduled) != 1 || len(partial) != 0 {
		t.Fatalf("scheduled backups under %s after two runs with keep: 1: %v (unfinished: %v)", clusterDir, scheduled, partial)
	}
	if len(upgrade) != 1 {
		t.Errorf("the backup before the upgrade is not kept beside the scheduled ones: %v", upgrade)
	}
	// The backup is root's alone on the volume (the dump holds every user's job records).
	if st, err := os.Stat(scheduled[0]); err != nil {
		t.Error(err)
	} else if st.Mode().Perm()&0o077 != 0 {
		t.Errorf("the scheduled backup %s: mode %v, want nothing for group and others", scheduled[0], st.Mode().Perm())
	}
	dump, err := os.ReadFile(filepath.Join(scheduled[0], "accounting.sql"))
	if err != nil || !strings.Contains(string(dump), "-- Dump completed") {
		t.Errorf("the scheduled dump %s: %v (%d bytes)", scheduled[0], err, len(dump))
	}
	check := exec.Command("sha256sum", "--quiet", "-c", "SHA256SUMS")
	check.Dir = scheduled[0]
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("the scheduled backup's checksums: %v\n%s", err, out)
	}

	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/backups"}]`)
	e.waitFor(time.Minute, "the CronJob deleted with spec.backups", func() (bool, string) {
		out, err := e.kubectl("get", "cronjob", cluster+"-backup", "-n", ns)
		return err != nil && strings.Contains(out, "NotFound"), out
	})
}
