package slurm_test

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/render/backup"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// TestRestoringIntoANewCluster follows docs/backup.md's restore into a new cluster: the old
// cluster's scheduled backup (the database's dump and a copy of slurmctld's state) is taken and
// the old cluster is gone; a new one is made from the same spec with keys of its own (a new
// munge key and JWT key), an empty database and an empty spool. With its slurmdbd and slurmctld
// stopped, the dump is loaded and the state put in place, and both start again. Expected,
// written first:
//   - the new cluster starts empty (no queued job, no job in sacct);
//   - after the restore, the job queued at the backup is queued again with its id, name and
//     reason, and the job finished before it is in sacct with its user and state;
//   - a new job gets an id above both (no id is used twice) and runs on the new cluster's
//     worker.
func TestRestoringIntoANewCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r := render(t, spec(t, 1))
	old := startCluster(t, ctx, r, 1)
	login(t, ctx, old, "srun", "-N1", "true")
	var finished string
	if err := old.WaitFor(ctx, "the finished job in sacct", func() (bool, error) {
		out, err := old.Exec(ctx, loginHost, "sacct", "-n", "-X", "-P", "-o", "JobID,State", "-S", "now-1hour")
		finished, _, _ = strings.Cut(strings.TrimSpace(out), "|")
		return err == nil && strings.HasSuffix(strings.TrimSpace(out), "|COMPLETED") && !strings.Contains(strings.TrimSpace(out), "\n"), nil
	}); err != nil {
		t.Fatal(err)
	}
	queued := strings.TrimSpace(login(t, ctx, old, "sbatch", "--parsable", "-J", "queued-at-backup", "--begin=now+1hour", "--wrap", "true"))
	// slurmctld saves its state a moment after a change: the backup copies what it saved, so
	// wait until the saved job state holds the queued job (its name is in the file).
	if err := old.WaitFor(ctx, "slurmctld to save the queued job", func() (bool, error) {
		_, err := old.Exec(ctx, ctlHost, "grep", "-q", "queued-at-backup", "/var/spool/slurmctld/job_state")
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	dir := takeScheduledBackup(t, ctx, old, r)
	if err := old.Stop(); err != nil {
		t.Fatalf("stop the old cluster: %v", err)
	}

	fresh := r
	fresh.in.Keys.Munge, fresh.in.Keys.JWT = randomKey(t, 1024), randomKey(t, 32)
	nu := startCluster(t, ctx, fresh, 1)
	if out := login(t, ctx, nu, "sh", "-c", "squeue -h; sacct -n -X -a -P -o JobID -S 2020-01-01"); strings.TrimSpace(out) != "" {
		t.Fatalf("the new cluster is not empty before the restore:\n%s", out)
	}
	restored := filepath.Join(nu.SharedDir(), "restore")
	if out, err := exec.Command("cp", "-a", dir, restored).CombinedOutput(); err != nil {
		t.Fatalf("copy the backup to the new cluster: %v\n%s", err, out)
	}

	// docs/backup.md: stop slurmctld and slurmdbd, load the dump, put the state in place, start.
	for _, d := range [][2]string{{ctlHost, slurmharness.Slurmctld}, {acctHost, slurmharness.Slurmdbd}} {
		if err := nu.StopDaemon(ctx, d[0], d[1], 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	const restoreDB = `set -e
mariadb --no-defaults --socket=/run/mysqld/mysqld.sock -u root -e 'DROP DATABASE slurm_acct_db; CREATE DATABASE slurm_acct_db'
mariadb --no-defaults --socket=/run/mysqld/mysqld.sock -u root slurm_acct_db < /shared/restore/accounting.sql`
	if out, err := nu.Exec(ctx, acctHost, "sh", "-c", restoreDB); err != nil {
		t.Fatalf("restore the database: %v\n%s", err, out)
	}
	const restoreState = `set -e
cd /var/spool/slurmctld && mkdir /tmp/spool-new && find . -mindepth 1 -maxdepth 1 -exec mv -t /tmp/spool-new/ {} + && cp -a /shared/restore/statesave/. .`
	if out, err := nu.Exec(ctx, ctlHost, "sh", "-c", restoreState); err != nil {
		t.Fatalf("restore the state: %v\n%s", err, out)
	}
	for _, h := range []string{acctHost, ctlHost} {
		if err := nu.ReplaceHost(ctx, h, os.Getenv("SLURM_ROOTFS"), 30*time.Second); err != nil {
			t.Fatalf("start %s again: %v", h, err)
		}
	}

	if got := strings.TrimSpace(login(t, ctx, nu, "squeue", "-h", "-j", queued, "-o", "%i %j %T %r")); got != queued+" queued-at-backup PENDING BeginTime" {
		t.Errorf("the job queued at the backup is %q in the new cluster", got)
	}
	if got := strings.TrimSpace(login(t, ctx, nu, "sacct", "-n", "-X", "-P", "-o", "User,State", "-j", finished)); got != "root|COMPLETED" {
		t.Errorf("sacct says %q of the job finished before the backup", got)
	}
	next := strings.TrimSpace(login(t, ctx, nu, "sbatch", "--parsable", "--wait", "--wrap", "hostname"))
	for _, earlier := range []string{finished, queued} {
		if n, e := atoi(t, next), atoi(t, earlier); n <= e {
			t.Errorf("the new cluster's first job has id %d, not above the restored job %d", n, e)
		}
	}
	if got := strings.TrimSpace(login(t, ctx, nu, "sacct", "-n", "-X", "-P", "-o", "State,NodeList", "-j", next)); got != "COMPLETED|worker-0" {
		t.Errorf("the new cluster's first job: %q", got)
	}
}

// takeScheduledBackup runs the scheduled backups' script (backup.Script) on the controller
// host, as the CronJob's pod does, and copies the backup it wrote out of the cluster (it is
// gone with the cluster); it returns the copy's folder.
func takeScheduledBackup(t *testing.T, ctx context.Context, c *slurmharness.Cluster, r rendered) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(c.SharedDir(), "backup"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.SharedDir(), "slurmdbd.conf"), r.slurmdbd, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := c.Exec(ctx, ctlHost, "env", "BACKUP=/shared/backup", "CLUSTER=demo", "NAME=scheduled", "KEEP=3",
		"DBD_CONF=/shared/slurmdbd.conf", "STATE=/var/spool/slurmctld", "/bin/sh", "-c", backup.Script)
	if err != nil {
		t.Fatalf("the scheduled backup: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`backup written to /shared/(backup/demo/\d{8}T\d{6}Z-scheduled) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the backup script did not say where it wrote:\n%s", out)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	if out, err := exec.Command("cp", "-a", filepath.Join(c.SharedDir(), m[1]), dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the backup out: %v\n%s", err, out)
	}
	check := exec.Command("sha256sum", "--quiet", "-c", "SHA256SUMS")
	check.Dir = dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("the backup's checksums: %v\n%s", err, out)
	}
	return dir
}

func randomKey(t *testing.T, n int) []byte {
	t.Helper()
	k := make([]byte, n)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("a job id %q: %v", s, err)
	}
	return n
}
