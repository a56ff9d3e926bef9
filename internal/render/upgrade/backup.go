// Package upgrade renders what a change of Slurm release needs besides new images: the Job that
// backs up the accounting database and slurmctld's state before slurmdbd and slurmctld of the
// newer release convert them.
package upgrade

import (
	_ "embed"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
)

// BackupScript is the script the backup Job runs (sh, in the accounting or controller image).
//
//go:embed backup.sh
var BackupScript string

// Paths inside the backup Job's pod.
const (
	BackupDir   = "/backup"
	StateDir    = "/statesave"
	dbdConfDir  = base.SecretsDir + "/slurmdbd"
	volumeState = "statesave"
	volumeDBD   = "slurmdbd-conf"
	volumeBak   = "backup"
)

// BackupParams are what the backup Job needs beyond the spec.
type BackupParams struct {
	// Target names the releases the upgrade goes to ("accounting=26.05 controller=26.05"):
	// the Job's name comes from it.
	Target string
	// From and To are the controller's release before and after, for the backup's folder name.
	From, To string
	// Image runs the Job: the new accounting image (it has mariadb-dump) or, without
	// accounting, the new controller image.
	Image string
	// ControllerNode is the Kubernetes node of the first controller pod, when its spool is a
	// claim of its own (ReadWriteOnce): the Job runs there to mount it too.
	ControllerNode string
}

// BackupJob renders the backup Job. It mounts the volume spec.upgrades.backup names, the
// controller's spool (its volume source, or the first controller pod's claim) and, with
// accounting, slurmdbd.conf for the database's address and credentials.
func BackupJob(sc *slurmv1alpha1.SlurmCluster, p BackupParams) (*batchv1.Job, error) {
	b := sc.Spec.Upgrades.Backup
	if b == nil || b.VolumeSourceName == "" {
		return nil, fmt.Errorf("spec.upgrades.backup.volumeSourceName is not set")
	}
	bak, err := base.VolumeSourceVolume(sc, b.VolumeSourceName, volumeBak)
	if err != nil {
		return nil, fmt.Errorf("spec.upgrades.backup: %w", err)
	}
	if bak.EmptyDir != nil {
		return nil, fmt.Errorf("spec.upgrades.backup: volume source %q is an emptyDir, gone with the Job's pod", b.VolumeSourceName)
	}
	env := []corev1.EnvVar{
		{Name: "BACKUP", Value: BackupDir},
		{Name: "CLUSTER", Value: sc.Spec.ClusterName},
		{Name: "FROM", Value: p.From},
		{Name: "TO", Value: p.To},
	}
	volumes := []corev1.Volume{bak}
	mounts := []corev1.VolumeMount{{Name: volumeBak, MountPath: BackupDir}}

	pod := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure}
	if spool := sc.Spec.SlurmNodes.Controller.Volumes.Spool; spool != nil && spool.VolumeSourceName != "" {
		v, err := base.VolumeSourceVolume(sc, spool.VolumeSourceName, volumeState)
		if err != nil {
			return nil, fmt.Errorf("controller spool: %w", err)
		}
		volumes = append(volumes, v)
	} else {
		// The StatefulSet's claim of pod 0 ("spool-<statefulset>-0", the controller's spool
		// unless it names a volume source), most likely ReadWriteOnce: the Job runs on that
		// pod's node, where the volume is attached.
		if p.ControllerNode == "" {
			return nil, fmt.Errorf("the first controller pod has no node yet: its spool claim cannot be mounted")
		}
		claim := base.VolumeSpool + "-" + sc.ComponentName(slurmv1alpha1.ComponentController) + "-0"
		volumes = append(volumes, corev1.Volume{Name: volumeState, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: true}}})
		pod.NodeName = p.ControllerNode
	}
	mounts = append(mounts, corev1.VolumeMount{Name: volumeState, MountPath: StateDir, ReadOnly: true})
	env = append(env, corev1.EnvVar{Name: "STATE", Value: StateDir})
	if sc.Spec.SlurmNodes.Accounting.Enabled {
		volumes = append(volumes, corev1.Volume{Name: volumeDBD, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: sc.SlurmdbdConfigSecretName(), DefaultMode: ptr.To[int32](0o400)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: volumeDBD, MountPath: dbdConfDir, ReadOnly: true})
		env = append(env, corev1.EnvVar{Name: "DBD_CONF", Value: dbdConfDir + "/" + slurmconf.SlurmdbdConf})
	}
	pod.Containers = []corev1.Container{base.Container(sc, corev1.Container{
		Name:         "backup",
		Image:        p.Image,
		Command:      []string{"/bin/sh", "-c", BackupScript},
		Env:          env,
		VolumeMounts: mounts,
		// Root, to read the slurm user's 0700 state and keep every file's owner in the copy;
		// nothing more than reading and writing files.
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
			Add:  []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER"},
		}},
	})}
	pod.Volumes = volumes
	if pod.NodeName == "" {
		base.Scheduling(sc, sc.Spec.SlurmNodes.Controller.K8sNodeFilterName, &pod)
	}
	base.PullSecrets(sc, &pod)
	base.Harden(&pod)
	comp := slurmv1alpha1.ComponentUpgradeBackup
	meta := base.ObjectMeta(sc, sc.UpgradeBackupJobName(p.Target), comp)
	meta.Annotations = map[string]string{AnnotationTarget: p.Target}
	return &batchv1.Job{
		TypeMeta:   base.TypeMeta("batch/v1", "Job"),
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](2),
			ActiveDeadlineSeconds: ptr.To[int64](3 * 3600),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: base.ObjectMeta(sc, "", comp),
				Spec:       pod,
			},
		},
	}, nil
}

// AnnotationTarget on the backup Job names the releases it was taken for.
const AnnotationTarget = "slurm.hpc.dev/upgrade-target"
