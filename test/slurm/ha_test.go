package slurm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmctld"
	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// TestABackupControllerTakesOver runs controller size 2 as rendered: two slurmctld hosts sharing
// one StateSaveLocation (the spool's ReadWriteMany volume source), workers fetching their
// config from either. The primary stops while a job runs; the backup takes over, the job
// completes, sacct has it, and new jobs run.
func TestABackupControllerTakesOver(t *testing.T) { checkBackupTakesOver(t, "") }

// checkBackupTakesOver is TestABackupControllerTakesOver with the controllers' shared
// StateSaveLocation in sharedState (a network file system's mount), or in the harness's own
// folder when empty.
func checkBackupTakesOver(t *testing.T, sharedState string) {
	// Well under the package's 10 minutes: a stuck step fails here, with the daemons' logs.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc := spec(t, 2)
	sc.Spec.VolumeSources = append(sc.Spec.VolumeSources, slurmv1alpha1.VolumeSource{
		Name: "controller-spool", PersistentVolumeClaim: &slurmv1alpha1.ClaimSource{ClaimName: "controller-spool-pvc"},
	})
	sc.Spec.SlurmNodes.Controller.Size = 2
	sc.Spec.SlurmNodes.Controller.Volumes.Spool = &slurmv1alpha1.SpoolVolume{VolumeSourceName: "controller-spool"}
	r := render(t, sc)

	// Both pods mount the one claim: no claim template, which would give each its own state.
	sts, err := slurmctld.StatefulSet(r.in)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 0 || *sts.Spec.Replicas != 2 {
		t.Fatalf("controller StatefulSet: %d replicas, claim templates %v", *sts.Spec.Replicas, sts.Spec.VolumeClaimTemplates)
	}
	shared := false
	for _, v := range sts.Spec.Template.Spec.Volumes {
		shared = shared || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "controller-spool-pvc")
	}
	if !shared {
		t.Fatal("the controller pods do not mount controller-spool-pvc")
	}

	if want := "demo-controller-0:6817,demo-controller-1:6817"; worker.ConfServer(r.in.Cluster) != want {
		t.Fatalf("workers' --conf-server %q, want %q", worker.ConfServer(r.in.Cluster), want)
	}
	c := startClusterWith(t, ctx, r, 2, func(cfg *slurmharness.Config) {
		cfg.BackupController = &slurmharness.Host{Name: "demo-controller-1"}
		cfg.SharedState = sharedState
		for i := range cfg.Workers {
			cfg.Workers[i].SlurmdEnv = []string{"SLURM_CONF_SERVER=" + worker.ConfServer(r.in.Cluster)}
		}
	})

	ping := login(t, ctx, c, "scontrol", "ping")
	if !strings.Contains(ping, "(primary) at demo-controller-0 is UP") || !strings.Contains(ping, "(backup) at demo-controller-1 is UP") {
		t.Fatalf("scontrol ping:\n%s", ping)
	}
	job := sbatch(t, ctx, c, "-N2", "--wrap", "srun sleep 20")
	waitRunning(t, ctx, c, job)
	// The step too: a batch script whose srun has not yet made its step when the primary stops
	// needs a controller for it, and srun gives up before the backup takes over.
	if err := c.WaitFor(ctx, "step "+job+".0 running", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-s", "-j", job, "-o", "%i")
		return err == nil && strings.Contains(out, job+".0"), nil
	}); err != nil {
		t.Fatal(err)
	}

	stopped := time.Now()
	if err := c.StopDaemon(ctx, ctlHost, slurmharness.Slurmctld, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The backup takes control once the primary has not answered for SlurmctldTimeout.
	var last string
	if err := c.WaitFor(ctx, "the backup in control", func() (bool, error) {
		out, _ := c.Exec(ctx, loginHost, "scontrol", "ping")
		last = out
		return strings.Contains(out, "at demo-controller-0 is DOWN") && strings.Contains(out, "at demo-controller-1 is UP"), nil
	}); err != nil {
		t.Fatalf("%v: %s", err, last)
	}
	waitJob(t, ctx, c, job, "COMPLETED")
	t.Logf("the job completed under the backup, %.0fs after the primary stopped", time.Since(stopped).Seconds())
	if out := login(t, ctx, c, "sacct", "-n", "-P", "-j", job, "-o", "JobID,State,ExitCode"); !strings.Contains(out, job+"|COMPLETED|0:0") || !strings.Contains(out, job+".0|COMPLETED|0:0") {
		t.Errorf("sacct after the takeover:\n%s", out)
	}
	if out := login(t, ctx, c, "srun", "-N2", "hostname"); len(strings.Fields(out)) != 2 {
		t.Errorf("srun -N2 hostname under the backup:\n%s", out)
	}
}
