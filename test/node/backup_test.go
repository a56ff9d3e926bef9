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
	dir := hostVolume("upgrade-backup")
	patch := `[{"op":"add","path":"/spec/volumeSources/-","value":{"name":"upgrade-backup","hostPath":{"path":"` + dir + `","type":"DirectoryOrCreate"}}},` +
		`{"op":"add","path":"/spec/upgrades","value":{"backup":{"volumeSourceName":"upgrade-backup"}}}]`
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", patch)

	var sc slurmv1alpha1.SlurmCluster
	if err := json.Unmarshal([]byte(e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "json")), &sc); err != nil {
		t.Fatal(err)
	}
	sc = *base.WithDefaults(&sc)
	job, err := render.UpgradeBackupJob(&sc, render.UpgradeBackupParams{
		Target: "node-test", From: "24.11", To: "24.11", Image: sc.Spec.Images.Accounting,
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

	backups, _ := filepath.Glob(filepath.Join(dir, sc.Spec.ClusterName, "*-slurm-24.11-to-24.11"))
	if len(backups) != 1 {
		t.Fatalf("backups under %s: %v", dir, backups)
	}
	b := backups[0]
	dump, err := os.ReadFile(filepath.Join(b, "accounting.sql"))
	if err != nil {
		t.Fatal(err)
	}
	// The jobs sacct showed above are in it.
	if !strings.Contains(string(dump), "INSERT INTO `"+sc.Spec.ClusterName+"_job_table`") || !strings.Contains(string(dump), "-- Dump completed") {
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
