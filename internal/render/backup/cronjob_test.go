package backup

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

func TestScheduledBackupsAreACronJobBesideTheController(t *testing.T) {
	sc := cluster(t)
	if cj, err := CronJob(sc); cj != nil || err != nil {
		t.Fatalf("without spec.backups: %v %v, want nothing", cj, err)
	}

	sc.Spec.Backups = &slurmv1alpha1.Backups{Schedule: "30 2 * * *", TimeZone: "Asia/Ho_Chi_Minh", VolumeSourceName: "backups", Keep: 14}
	cj, err := CronJob(sc)
	if err != nil {
		t.Fatal(err)
	}
	if cj.Name != sc.BackupCronJobName() || cj.Spec.Schedule != "30 2 * * *" || cj.Spec.TimeZone == nil || *cj.Spec.TimeZone != "Asia/Ho_Chi_Minh" {
		t.Errorf("name %q, schedule %q, time zone %v", cj.Name, cj.Spec.Schedule, cj.Spec.TimeZone)
	}
	// One at a time; a missed run is still taken within the hour.
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent || cj.Spec.StartingDeadlineSeconds == nil || *cj.Spec.Suspend {
		t.Errorf("concurrency %q, starting deadline %v, suspend %v", cj.Spec.ConcurrencyPolicy, cj.Spec.StartingDeadlineSeconds, *cj.Spec.Suspend)
	}
	if got := cj.Spec.JobTemplate.Labels["app.kubernetes.io/component"]; got != string(slurmv1alpha1.ComponentBackup) {
		t.Errorf("the Jobs' component label is %q", got)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	e := env(pod.Containers[0])
	if e["NAME"] != ScheduledName || e["KEEP"] != "14" || e["STATE"] != StateDir || e["DBD_CONF"] == "" || e["FROM"] != "" {
		t.Errorf("env %v", e)
	}
	if img := pod.Containers[0].Image; img != sc.Spec.Images.Accounting {
		t.Errorf("image %q, want the accounting image (it has mariadb-dump)", img)
	}
	// The spool is the first controller pod's claim: the pod goes where that pod is.
	if pod.NodeName != "" || pod.Affinity == nil || pod.Affinity.PodAffinity == nil {
		t.Fatalf("node %q, affinity %+v: want a pod affinity to the first controller pod", pod.NodeName, pod.Affinity)
	}
	term := pod.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != corev1.LabelHostname || term.LabelSelector.MatchLabels[podNameLabel] != sc.Name+"-controller-0" {
		t.Errorf("the affinity term %+v", term)
	}

	// Without accounting: the controller image, nothing to dump.
	sc.Spec.SlurmNodes.Accounting.Enabled = false
	if cj, err = CronJob(sc); err != nil {
		t.Fatal(err)
	}
	pod = cj.Spec.JobTemplate.Spec.Template.Spec
	if e := env(pod.Containers[0]); e["DBD_CONF"] != "" || pod.Containers[0].Image != sc.Spec.Images.Controller {
		t.Errorf("without accounting: image %q, env %v", pod.Containers[0].Image, e)
	}
}

func TestScheduledBackupsRefuseWhatTheCronJobAPIWould(t *testing.T) {
	for _, c := range []struct {
		backups slurmv1alpha1.Backups
		want    string
	}{
		{slurmv1alpha1.Backups{Schedule: "61 * * * *", VolumeSourceName: "backups"}, `spec.backups.schedule "61 * * * *"`},
		{slurmv1alpha1.Backups{Schedule: "CRON_TZ=UTC 0 3 * * *", VolumeSourceName: "backups"}, "set the time zone in spec.backups.timeZone"},
		{slurmv1alpha1.Backups{Schedule: "@daily", TimeZone: "Mars/Olympus", VolumeSourceName: "backups"}, `spec.backups.timeZone "Mars/Olympus" is not a time zone`},
		{slurmv1alpha1.Backups{Schedule: "@daily", VolumeSourceName: "scratch"}, `spec.backups: volume source "scratch" is an emptyDir`},
		{slurmv1alpha1.Backups{Schedule: "@daily", VolumeSourceName: "nowhere"}, "spec.backups"},
	} {
		sc := cluster(t)
		sc.Spec.VolumeSources = append(sc.Spec.VolumeSources, slurmv1alpha1.VolumeSource{Name: "scratch", EmptyDir: &slurmv1alpha1.EmptyDirSource{}})
		b := c.backups
		sc.Spec.Backups = &b
		cj, err := CronJob(sc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, %v; want an error with %q", c.backups, cj, err, c.want)
		}
	}
}
