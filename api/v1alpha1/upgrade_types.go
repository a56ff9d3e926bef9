package v1alpha1

// Upgrades configures what the operator does before it changes the cluster's Slurm release
// (docs/upgrades.md).
type Upgrades struct {
	// Backup is taken before slurmdbd and slurmctld of a newer release start: a dump of the
	// accounting database and a copy of slurmctld's StateSaveLocation, the two things a newer
	// release converts and an older one can then no longer read. The upgrade waits until it
	// is taken; without backup set, an upgrade that changes slurmdbd's or slurmctld's release
	// waits (SlurmUpgrading, reason BackupNotConfigured) until it names a volume or says skip.
	// +optional
	Backup *UpgradeBackup `json:"backup,omitempty"`
}

// UpgradeBackup says where the backup before an upgrade goes, or that there is none.
//
// +kubebuilder:validation:XValidation:rule="has(self.volumeSourceName) != (has(self.skip) && self.skip)",message="set either volumeSourceName (the volume the backup is written to) or skip: true (upgrade without a backup)"
type UpgradeBackup struct {
	// VolumeSourceName names an entry of spec.volumeSources the backup Job writes to, under
	// <clusterName>/<time>-slurm-<from>-to-<to>/: accounting.sql (mariadb-dump of the
	// accounting database), statesave/ (a copy of StateSaveLocation, owners kept) and
	// SHA256SUMS. The Job writes as root: an NFS export must not squash root for it. An
	// emptyDir source is refused (the backup would go with the Job's pod).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	VolumeSourceName string `json:"volumeSourceName,omitempty"`

	// Skip upgrades without a backup. A failed upgrade then cannot be undone: an older
	// slurmctld cannot read the state files, nor an older slurmdbd the database, of a newer one.
	// +optional
	Skip bool `json:"skip,omitempty"`
}

// UpgradeBackupSkipped reports whether the spec says to upgrade without a backup.
func (c *SlurmCluster) UpgradeBackupSkipped() bool {
	b := c.Spec.Upgrades.Backup
	return b != nil && b.Skip
}
