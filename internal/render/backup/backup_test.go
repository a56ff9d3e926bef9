package backup

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
)

func cluster(t *testing.T) *slurmv1alpha1.SlurmCluster {
	t.Helper()
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
	if err != nil {
		t.Fatal(err)
	}
	sc = base.WithDefaults(sc)
	sc.Spec.VolumeSources = append(sc.Spec.VolumeSources,
		slurmv1alpha1.VolumeSource{Name: "backups", PersistentVolumeClaim: &slurmv1alpha1.ClaimSource{ClaimName: "slurm-backups"}},
		slurmv1alpha1.VolumeSource{Name: "spool", PersistentVolumeClaim: &slurmv1alpha1.ClaimSource{ClaimName: "shared-spool"}})
	sc.Spec.Upgrades.Backup = &slurmv1alpha1.UpgradeBackup{VolumeSourceName: "backups"}
	return sc
}

func env(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

func TestTheBackupJobFollowsTheSpool(t *testing.T) {
	p := UpgradeParams{Target: "accounting=26.05 controller=26.05", From: "24.11", To: "26.05", Image: "slurmdbd:26.05", ControllerNode: "node-a"}

	// A spool claim of its own: on the first controller pod's node, its claim read-only.
	sc := cluster(t)
	j, err := UpgradeJob(sc, p)
	if err != nil {
		t.Fatal(err)
	}
	pod := j.Spec.Template.Spec
	if pod.NodeName != "node-a" || pod.Affinity != nil {
		t.Errorf("a claim spool: the Job runs on %q with affinity %v, want node-a and none", pod.NodeName, pod.Affinity)
	}
	var claim *corev1.PersistentVolumeClaimVolumeSource
	for _, v := range pod.Volumes {
		if v.Name == volumeState {
			claim = v.PersistentVolumeClaim
		}
	}
	if claim == nil || claim.ClaimName != "spool-"+sc.Name+"-controller-0" || !claim.ReadOnly {
		t.Errorf("the state volume is %+v, want the first controller pod's claim, read-only", claim)
	}
	e := env(pod.Containers[0])
	if e["STATE"] != StateDir || e["DBD_CONF"] == "" || e["FROM"] != "24.11" || e["TO"] != "26.05" || e["CLUSTER"] != sc.Spec.ClusterName {
		t.Errorf("env %v", e)
	}
	if !strings.HasPrefix(j.Name, sc.Name+"-upgrade-backup-") || j.Annotations[AnnotationTarget] != p.Target {
		t.Errorf("the Job is %s with annotations %v", j.Name, j.Annotations)
	}

	// A shared spool (a volume source): scheduled as the controller is, no node of its own.
	sc.Spec.SlurmNodes.Controller.Volumes.Spool = &slurmv1alpha1.SpoolVolume{VolumeSourceName: "spool"}
	p.ControllerNode = ""
	if j, err = UpgradeJob(sc, p); err != nil {
		t.Fatal(err)
	}
	if pod = j.Spec.Template.Spec; pod.NodeName != "" {
		t.Errorf("a shared spool: the Job is bound to node %q", pod.NodeName)
	}

	// Without accounting: no dump.
	sc.Spec.SlurmNodes.Accounting.Enabled = false
	if j, err = UpgradeJob(sc, p); err != nil {
		t.Fatal(err)
	}
	if e := env(j.Spec.Template.Spec.Containers[0]); e["DBD_CONF"] != "" {
		t.Errorf("without accounting the Job dumps %q", e["DBD_CONF"])
	}
}

func TestTheBackupJobRefusesWhatItCannotDo(t *testing.T) {
	sc := cluster(t)
	if _, err := UpgradeJob(sc, UpgradeParams{Image: "x"}); err == nil || !strings.Contains(err.Error(), "no node yet") {
		t.Errorf("a claim spool without the controller's node: %v", err)
	}
	sc.Spec.Upgrades.Backup = &slurmv1alpha1.UpgradeBackup{VolumeSourceName: "nope"}
	if _, err := UpgradeJob(sc, UpgradeParams{Image: "x", ControllerNode: "n"}); err == nil || !strings.Contains(err.Error(), `"nope" is not in spec.volumeSources`) {
		t.Errorf("an unknown backup volume: %v", err)
	}
	sc.Spec.VolumeSources = append(sc.Spec.VolumeSources, slurmv1alpha1.VolumeSource{Name: "scratch", EmptyDir: &slurmv1alpha1.EmptyDirSource{}})
	sc.Spec.Upgrades.Backup = &slurmv1alpha1.UpgradeBackup{VolumeSourceName: "scratch"}
	if _, err := UpgradeJob(sc, UpgradeParams{Image: "x", ControllerNode: "n"}); err == nil || !strings.Contains(err.Error(), "is an emptyDir") {
		t.Errorf("a backup to an emptyDir: %v", err)
	}
	sc.Spec.Upgrades.Backup = &slurmv1alpha1.UpgradeBackup{Skip: true}
	if _, err := UpgradeJob(sc, UpgradeParams{Image: "x", ControllerNode: "n"}); err == nil {
		t.Error("a Job made though the spec skips the backup")
	}
}
