package slurm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/render/slurmctld"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// slurmctld started as the controller pod starts it (without -i) refuses a job state file cut
// short, with the words the operator looks for, instead of carrying on without the jobs it
// held; with the file restored from the copy taken before, it starts and the running job is
// still there (the runbook of docs/reliability.md).
func TestSlurmctldRefusesStateItCannotRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := render(t, spec(t, 1))
	sts, err := slurmctld.StatefulSet(r.in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := strings.Join(sts.Spec.Template.Spec.Containers[0].Command, " ")
	if !strings.Contains(cmd, "exec slurmctld -D\n") && !strings.HasSuffix(cmd, "exec slurmctld -D") {
		t.Fatalf("the controller pod starts slurmctld otherwise:\n%s", cmd)
	}
	c := startCluster(t, ctx, r, 1)
	job := sbatch(t, ctx, c, "-w", "worker-0", "--wrap", "sleep 300")
	waitRunning(t, ctx, c, job)

	if err := c.StopDaemon(ctx, ctlHost, slurmharness.Slurmctld, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	state := slurmfacts.StateSaveLocation + "/job_state"
	if _, err := c.Exec(ctx, ctlHost, "sh", "-c", fmt.Sprintf("cp -p %[1]s /root/job_state.backup && head -c 64 /root/job_state.backup > %[1]s", state)); err != nil {
		t.Fatal(err)
	}
	out, err := c.Exec(ctx, ctlHost, "timeout", "60", "/usr/sbin/slurmctld", "-D")
	if err == nil || !strings.Contains(out+err.Error(), slurmfacts.StateUnreadable) {
		t.Fatalf("slurmctld with its job state cut short: %v\n%s", err, out)
	}
	for _, l := range strings.Split(out+err.Error(), "\n") {
		if strings.Contains(l, slurmfacts.StateUnreadable) {
			t.Logf("slurmctld refused: %s", strings.TrimSpace(l))
			break
		}
	}

	if _, err := c.Exec(ctx, ctlHost, "cp", "-p", "/root/job_state.backup", state); err != nil {
		t.Fatal(err)
	}
	if err := c.StartDaemon(ctlHost, slurmharness.Slurmctld, "/usr/sbin/slurmctld", "-D"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFor(ctx, "job "+job+" running after the restore", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-j", job, "-o", "%T")
		return err == nil && strings.TrimSpace(out) == "RUNNING", nil
	}); err != nil {
		t.Fatal(err)
	}
}
