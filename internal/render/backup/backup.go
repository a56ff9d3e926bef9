// Package backup renders the backups of the accounting database and slurmctld's state: the Job
// taken before slurmdbd and slurmctld of a newer release convert them (spec.upgrades.backup),
// and the CronJob of scheduled backups (spec.backups).
package backup

import (
	_ "embed"
	"fmt"
	"strings"
	"time"
	// The time zones, for CheckSchedule: the manager's image has no zone files.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
)

// Script is the script every backup Job runs (sh, in the accounting or controller image).
//
//go:embed backup.sh
var Script string

// Paths inside the backup Job's pod.
const (
	BackupDir   = "/backup"
	StateDir    = "/statesave"
	dbdConfDir  = base.SecretsDir + "/slurmdbd"
	volumeState = "statesave"
	volumeDBD   = "slurmdbd-conf"
	volumeBak   = "backup"
)

// UpgradeParams are what the backup Job needs beyond the spec.
type UpgradeParams struct {
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

// UpgradeJob renders the backup Job before an upgrade. It mounts the volume
// spec.upgrades.backup names, the controller's spool (its volume source, or the first
// controller pod's claim) and, with accounting, slurmdbd.conf for the database's address and
// credentials.
func UpgradeJob(sc *slurmv1alpha1.SlurmCluster, p UpgradeParams) (*batchv1.Job, error) {
	b := sc.Spec.Upgrades.Backup
	if b == nil || b.VolumeSourceName == "" {
		return nil, fmt.Errorf("spec.upgrades.backup.volumeSourceName is not set")
	}
	if spool := sc.Spec.SlurmNodes.Controller.Volumes.Spool; (spool == nil || spool.VolumeSourceName == "") && p.ControllerNode == "" {
		return nil, fmt.Errorf("the first controller pod has no node yet: its spool claim cannot be mounted")
	}
	env := []corev1.EnvVar{{Name: "FROM", Value: p.From}, {Name: "TO", Value: p.To}}
	pod, err := backupPod(sc, "spec.upgrades.backup", b.VolumeSourceName, p.Image, env, p.ControllerNode)
	if err != nil {
		return nil, err
	}
	comp := slurmv1alpha1.ComponentUpgradeBackup
	meta := base.ObjectMeta(sc, sc.UpgradeBackupJobName(p.Target), comp)
	meta.Annotations = map[string]string{AnnotationTarget: p.Target}
	return &batchv1.Job{
		TypeMeta:   base.TypeMeta("batch/v1", "Job"),
		ObjectMeta: meta,
		Spec:       jobSpec(sc, comp, pod),
	}, nil
}

// jobSpec is a backup Job's spec: a few tries, at most three hours.
func jobSpec(sc *slurmv1alpha1.SlurmCluster, comp slurmv1alpha1.Component, pod corev1.PodSpec) batchv1.JobSpec {
	return batchv1.JobSpec{
		BackoffLimit:          ptr.To[int32](2),
		ActiveDeadlineSeconds: ptr.To[int64](3 * 3600),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: base.ObjectMeta(sc, "", comp),
			Spec:       pod,
		},
	}
}

// backupPod is the pod of a backup Job: the script with the volume source named by field
// mounted at BackupDir, the controller's spool read-only at StateDir and, with accounting,
// slurmdbd.conf. controllerNode is the node of the first controller pod (the Job before an
// upgrade); empty, the pod is placed beside that controller pod by a pod affinity.
func backupPod(sc *slurmv1alpha1.SlurmCluster, field, volumeSource, image string, env []corev1.EnvVar, controllerNode string) (corev1.PodSpec, error) {
	pod := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure}
	bak, err := base.VolumeSourceVolume(sc, volumeSource, volumeBak)
	if err != nil {
		return pod, fmt.Errorf("%s: %w", field, err)
	}
	if bak.EmptyDir != nil {
		return pod, fmt.Errorf("%s: volume source %q is an emptyDir, gone with the Job's pod", field, volumeSource)
	}
	env = append([]corev1.EnvVar{
		{Name: "BACKUP", Value: BackupDir},
		{Name: "CLUSTER", Value: sc.Spec.ClusterName},
	}, env...)
	volumes := []corev1.Volume{bak}
	mounts := []corev1.VolumeMount{{Name: volumeBak, MountPath: BackupDir}}

	// The spool: a volume source, or the StatefulSet's claim of pod 0 ("spool-<statefulset>-0",
	// the controller's spool unless it names a volume source).
	sts := sc.ComponentName(slurmv1alpha1.ComponentController)
	claim := false
	if spool := sc.Spec.SlurmNodes.Controller.Volumes.Spool; spool != nil && spool.VolumeSourceName != "" {
		v, err := base.VolumeSourceVolume(sc, spool.VolumeSourceName, volumeState)
		if err != nil {
			return pod, fmt.Errorf("controller spool: %w", err)
		}
		volumes = append(volumes, v)
	} else {
		claim = true
		volumes = append(volumes, corev1.Volume{Name: volumeState, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: base.VolumeSpool + "-" + sts + "-0", ReadOnly: true}}})
	}
	// A ReadWriteOnce volume is attached to one node at a time: the pod runs where the first
	// controller pod runs. The Job before an upgrade is given that node; a CronJob's template
	// cannot know it, so its pods ask for the node of that pod by a required pod affinity
	// (with any spool: a volume source may be ReadWriteOnce too).
	switch {
	case controllerNode != "" && claim:
		pod.NodeName = controllerNode
	case controllerNode == "":
		pod.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
					podNameLabel:       sts + "-0",
					base.LabelInstance: sc.Name,
				}},
				TopologyKey: corev1.LabelHostname,
			}},
		}}
	default:
		base.Scheduling(sc, sc.Spec.SlurmNodes.Controller.K8sNodeFilterName, &pod)
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
		Image:        image,
		Command:      []string{"/bin/sh", "-c", Script},
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
	base.PullSecrets(sc, &pod)
	base.Harden(&pod)
	return pod, nil
}

// podNameLabel is the label the StatefulSet controller gives each of its pods, with the pod's
// name.
const podNameLabel = "statefulset.kubernetes.io/pod-name"

// AnnotationTarget on the backup Job names the releases it was taken for.
const AnnotationTarget = "slurm.hpc.dev/upgrade-target"

// ScheduledName is the folder suffix of scheduled backups (<time>-scheduled).
const ScheduledName = "scheduled"

// CronJob renders the CronJob of spec.backups, nil when it is unset. Its Jobs run the same
// script as the backup before an upgrade, with the current accounting image (it has
// mariadb-dump) or, without accounting, the controller image; one at a time, each keeping the
// newest spec.backups.keep scheduled backups.
func CronJob(sc *slurmv1alpha1.SlurmCluster) (*batchv1.CronJob, error) {
	b := sc.Spec.Backups
	if b == nil {
		return nil, nil
	}
	if err := CheckSchedule(b.Schedule, b.TimeZone); err != nil {
		return nil, err
	}
	image := sc.Spec.Images.Controller
	if sc.Spec.SlurmNodes.Accounting.Enabled {
		image = sc.Spec.Images.Accounting
	}
	keep := b.Keep
	if keep < 1 {
		keep = 7
	}
	env := []corev1.EnvVar{{Name: "NAME", Value: ScheduledName}, {Name: "KEEP", Value: fmt.Sprint(keep)}}
	pod, err := backupPod(sc, "spec.backups", b.VolumeSourceName, image, env, "")
	if err != nil {
		return nil, err
	}
	comp := slurmv1alpha1.ComponentBackup
	cj := &batchv1.CronJob{
		TypeMeta:   base.TypeMeta("batch/v1", "CronJob"),
		ObjectMeta: base.ObjectMeta(sc, sc.BackupCronJobName(), comp),
		Spec: batchv1.CronJobSpec{
			Schedule: b.Schedule,
			// A backup missed while the control plane was away still runs within the hour;
			// later than that, the next one is due soon enough.
			StartingDeadlineSeconds:    ptr.To[int64](3600),
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			Suspend:                    ptr.To(b.Suspend),
			SuccessfulJobsHistoryLimit: ptr.To[int32](3),
			FailedJobsHistoryLimit:     ptr.To[int32](3),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: base.ObjectMeta(sc, "", comp),
				Spec:       jobSpec(sc, comp, pod),
			},
		},
	}
	if b.TimeZone != "" {
		cj.Spec.TimeZone = ptr.To(b.TimeZone)
	}
	return cj, nil
}

// CheckSchedule refuses what the CronJob API would: a schedule cron cannot parse, a time
// zone in the schedule, a time zone without a zone file. The error names the field.
func CheckSchedule(schedule, timeZone string) error {
	if strings.Contains(schedule, "TZ=") {
		return fmt.Errorf("spec.backups.schedule %q: set the time zone in spec.backups.timeZone", schedule)
	}
	if _, err := cron.ParseStandard(schedule); err != nil {
		return fmt.Errorf("spec.backups.schedule %q: %v", schedule, err)
	}
	if timeZone != "" {
		if _, err := time.LoadLocation(timeZone); err != nil {
			return fmt.Errorf("spec.backups.timeZone %q is not a time zone: %v", timeZone, err)
		}
	}
	return nil
}
