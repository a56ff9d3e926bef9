package render

import (
	batchv1 "k8s.io/api/batch/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/backup"
)

// UpgradeBackupParams are what the backup Job before a change of Slurm release needs beyond
// the spec.
type UpgradeBackupParams = backup.UpgradeParams

// UpgradeBackupJob is the Job that dumps the accounting database and copies slurmctld's state
// to the volume spec.upgrades.backup names, before slurmdbd and slurmctld are upgraded.
func UpgradeBackupJob(sc *slurmv1alpha1.SlurmCluster, p UpgradeBackupParams) (*batchv1.Job, error) {
	return backup.UpgradeJob(sc, p)
}
