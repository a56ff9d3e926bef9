package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// backupHold says why an upgrade of slurmdbd or slurmctld may not start yet, with the reason
// SlurmUpgrading gives; "" when it may. A newer slurmdbd converts the accounting database and
// a newer slurmctld its state files at their first start, and neither can be read by the older
// release again: so before either rolls, the backup Job of spec.upgrades.backup must have
// completed (it is made here when missing), unless the spec says skip. The Job is named after
// the releases the upgrade goes to and kept, so each upgrade is backed up once.
func (r *SlurmClusterReconciler) backupHold(ctx context.Context, s *reconcileScope, live map[string]liveSlurm, changes func(slurmImage) bool) (string, string, error) {
	c := s.desired
	var target []string
	var from, to string
	needed := false
	for _, im := range slurmImages(c) {
		if im.component != slurmv1alpha1.ComponentAccounting && im.component != slurmv1alpha1.ComponentController {
			continue
		}
		want, ok := slurmfacts.ImageRelease(im.image)
		if !ok {
			continue
		}
		target = append(target, fmt.Sprintf("%s=%s", im.component, want))
		if changes(im) {
			needed = true
			// The releases the backup's folder and events name: the first daemon that moves.
			if from == "" {
				from, to = live[im.field].release.String(), want.String()
			}
		}
	}
	if !needed || c.UpgradeBackupSkipped() {
		return "", "", nil
	}
	sort.Strings(target)
	key := strings.Join(target, " ")
	b := c.Spec.Upgrades.Backup
	if b == nil || b.VolumeSourceName == "" {
		return "the upgrade waits for a backup of the accounting database and the controller's state: set " +
			"spec.upgrades.backup.volumeSourceName to a volume of spec.volumeSources, or spec.upgrades.backup.skip: true " +
			"to upgrade without one", slurmv1alpha1.ReasonBackupNotConfigured, nil
	}
	name := c.UpgradeBackupJobName(key)
	var job batchv1.Job
	found, err := r.getOptional(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, &job)
	if err != nil {
		return "", "", err
	}
	where := fmt.Sprintf("volume source %q, folder %s/", b.VolumeSourceName, c.Spec.ClusterName)
	switch {
	case found && jobSucceeded(&job):
		return "", "", nil
	case found && jobFinished(&job):
		why := fmt.Sprintf("the backup Job %s failed (see its pod's log); delete the Job to try again, or set "+
			"spec.upgrades.backup.skip: true", name)
		r.event(s.cluster, corev1.EventTypeWarning, "UpgradeBackupFailed", slurmv1alpha1.ConditionSlurmUpgrading,
			fmt.Sprintf("Slurm %s → %s waits: %s", from, to, why))
		return why, slurmv1alpha1.ReasonBackupFailed, nil
	case found:
		return fmt.Sprintf("the backup Job %s writes the accounting database and the controller's state to %s", name, where),
			slurmv1alpha1.ReasonWaitingForBackup, nil
	}
	p := render.UpgradeBackupParams{Target: key, From: from, To: to, Image: c.Spec.Images.Controller}
	if c.Spec.SlurmNodes.Accounting.Enabled {
		p.Image = c.Spec.Images.Accounting
	}
	if sp := c.Spec.SlurmNodes.Controller.Volumes.Spool; sp == nil || sp.VolumeSourceName == "" {
		var pod corev1.Pod
		podName := c.ComponentName(slurmv1alpha1.ComponentController) + "-0"
		if _, err := r.getOptional(ctx, types.NamespacedName{Namespace: c.Namespace, Name: podName}, &pod); err != nil {
			return "", "", err
		}
		if pod.Spec.NodeName == "" {
			return fmt.Sprintf("the backup waits for controller pod %s to be on a node (the Job mounts its spool claim there)", podName),
				slurmv1alpha1.ReasonWaitingForBackup, nil
		}
		p.ControllerNode = pod.Spec.NodeName
	}
	j, err := render.UpgradeBackupJob(c, p)
	if err != nil {
		return fmt.Sprintf("the backup Job cannot be made: %v", err), slurmv1alpha1.ReasonBackupFailed, nil
	}
	if _, _, err := r.apply(ctx, s.cluster, j); err != nil {
		return "", "", fmt.Errorf("create the backup Job: %w", err)
	}
	r.event(s.cluster, corev1.EventTypeNormal, "UpgradeBackup", slurmv1alpha1.ConditionSlurmUpgrading,
		fmt.Sprintf("backing up before Slurm %s → %s: Job %s writes to %s", from, to, name, where))
	return fmt.Sprintf("the backup Job %s writes the accounting database and the controller's state to %s", name, where),
		slurmv1alpha1.ReasonWaitingForBackup, nil
}
