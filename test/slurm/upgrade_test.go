package slurm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/render/backup"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// TestUpgradeLosesNoJob upgrades a running 24.11 cluster to 26.05 in the order the operator
// keeps (docs/upgrades.md): slurmdbd, then slurmctld, then the workers drain-first, then the
// login node, each host replaced as Kubernetes replaces a pod with a new image, keeping only
// its volumes (the controller's StateSaveLocation, the database). Expected, written first:
//   - a job running across the slurmdbd and slurmctld upgrades keeps running and completes;
//   - a job waiting for resources runs once they free, on a 24.11 and a 26.05 worker at once;
//   - a job held for a later start time stays queued, with its id and reason;
//   - the operator's backup script, run first, writes a dump that loads into a new database with
//     every job row, and a copy of the controller's state;
//   - sacct still lists the job that ended before the upgrade;
//   - afterwards every daemon and command says 26.05.
func TestUpgradeLosesNoJob(t *testing.T) {
	next := nextRootFS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := render(t, spec(t, 2))
	c := startCluster(t, ctx, r, 2)
	versionOf := func(host string) string { return scontrolVersion(t, ctx, c, host) }
	if v := versionOf(loginHost); !strings.Contains(v, " 24.11.") {
		t.Fatalf("the cluster starts on %q, want 24.11", v)
	}

	// Before the upgrade: a finished job in the accounting database, a running one, one
	// waiting for resources and one held for later.
	login(t, ctx, c, "srun", "-N1", "true")
	submit := func(args ...string) string {
		t.Helper()
		out := login(t, ctx, c, append([]string{"sbatch", "--parsable"}, args...)...)
		return strings.TrimSpace(strings.Split(out, ";")[0])
	}
	finished := strings.TrimSpace(login(t, ctx, c, "sacct", "-n", "-X", "-P", "-o", "JobID", "-S", "now-1hour"))
	if finished == "" || strings.Contains(finished, "\n") {
		t.Fatalf("sacct before the upgrade lists %q, want the one finished job", finished)
	}
	release := filepath.Join(c.SharedDir(), "release-running")
	running := submit("-N1", "-w", "worker-0", "--exclusive", "-o", "/shared/running.out",
		"--wrap", "echo started; while [ ! -e /shared/release-running ]; do sleep 1; done; echo done")
	waitJob(t, ctx, c, running, "RUNNING")
	// Steps name no MPI plugin: Debian's 26.05 packages have no mpi/pmix, the rendered
	// MpiDefault (docs/upgrades.md), and a 26.05 slurmd refuses a step asking for it.
	waiting := submit("-N2", "-o", "/shared/waiting.out", "--wrap", "srun --mpi=none -l scontrol --version")
	held := submit("--begin=now+1hour", "--wrap", "true")
	// queued waits for the scheduler to give a pending job its reason; a job that is not
	// pending fails at once.
	queued := func(id, reason string) {
		t.Helper()
		last := ""
		if err := c.WaitFor(ctx, "job "+id+" pending for "+reason, func() (bool, error) {
			out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-j", id, "-o", "%T %r")
			last = strings.TrimSpace(out)
			if err == nil && !strings.HasPrefix(last, "PENDING ") {
				return false, slurmharness.Permanent(fmt.Errorf("job %s is %q", id, last))
			}
			return last == "PENDING "+reason, err
		}); err != nil {
			t.Fatalf("%v, want PENDING %s", err, reason)
		}
	}
	queued(waiting, "Resources")
	queued(held, "BeginTime")

	replace := func(host string) {
		t.Helper()
		t0 := time.Now()
		if err := c.ReplaceHost(ctx, host, next, 30*time.Second); err != nil {
			t.Fatalf("replace %s with Slurm 26.05: %v", host, err)
		}
		t.Logf("%s replaced with Slurm 26.05 in %s", host, time.Since(t0).Round(time.Second))
	}
	// nodeVersion is the slurmd release slurmctld has from the node's registration (empty
	// until the node registers with a restarted slurmctld: waited for).
	nodeVersion := func(node string) string {
		t.Helper()
		v := ""
		if err := c.WaitFor(ctx, node+" to report its version", func() (bool, error) {
			out, err := c.Exec(ctx, loginHost, "scontrol", "show", "node", "-o", node)
			for _, f := range strings.Fields(out) {
				if s, ok := strings.CutPrefix(f, "Version="); ok && s != "N/A" {
					v = s
				}
			}
			return v != "", err
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}

	// The backup the operator's Job takes before the upgrade: its script, run where it finds
	// the database and the state as the Job's pod does.
	backupTo := checkUpgradeBackup(t, ctx, c, r, acctHost)
	t.Logf("backup before the upgrade: %s", backupTo)
	checkScheduledBackups(t, ctx, c, backupTo)

	// slurmdbd first: it converts the 24.11 database at its first start, and answers only then.
	replace(acctHost)
	if v := versionOf(acctHost); !strings.Contains(v, " 26.05.") {
		t.Fatalf("the accounting host runs %q after its replacement", v)
	}
	// Then slurmctld, from the state 24.11 saved.
	replace(ctlHost)
	waitJob(t, ctx, c, running, "RUNNING")
	queued(waiting, "Resources")
	queued(held, "BeginTime")
	if got := login(t, ctx, c, "sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", finished); strings.TrimSpace(got) != finished+"|COMPLETED" {
		t.Fatalf("after the controller's upgrade sacct says %q of the job finished before", got)
	}

	// The workers, drain-first: worker-1 is idle and goes first; worker-0 runs a job and
	// stays on 24.11 until it ends.
	rollWorker := func(i int) {
		t.Helper()
		node := "worker-" + string(rune('0'+i))
		login(t, ctx, c, "scontrol", "update", "NodeName="+node, "State=DRAIN", "Reason=slurm upgrade")
		if err := c.WaitFor(ctx, node+" to be drained", func() (bool, error) {
			out, err := c.Exec(ctx, loginHost, "sinfo", "-h", "-n", node, "-o", "%T")
			return strings.TrimSpace(out) == "drained", err
		}); err != nil {
			t.Fatal(err)
		}
		replace("demo-worker-" + string(rune('0'+i)))
		login(t, ctx, c, "scontrol", "update", "NodeName="+node, "State=RESUME")
	}
	rollWorker(1)
	if v0, v1 := nodeVersion("worker-0"), nodeVersion("worker-1"); !strings.HasPrefix(v0, "24.11.") || !strings.HasPrefix(v1, "26.05.") {
		t.Fatalf("mid-roll: worker-0 runs %q, worker-1 %q; want 24.11 and 26.05", v0, v1)
	}
	// The running job ends now; the waiting one then runs across both releases.
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ctx, c, running, "COMPLETED")
	waitJob(t, ctx, c, waiting, "COMPLETED")
	out, err := os.ReadFile(filepath.Join(c.SharedDir(), "waiting.out"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), " 24.11.") || !strings.Contains(string(out), " 26.05.") {
		t.Fatalf("the two-node job during the roll printed %q, want one step on each release", out)
	}
	rollWorker(0)
	replace(loginHost)

	// After: every daemon and command is 26.05, old records are kept, the held job still waits.
	for _, h := range []string{ctlHost, acctHost, loginHost, "demo-worker-0", "demo-worker-1"} {
		if v := versionOf(h); !strings.Contains(v, " 26.05.") {
			t.Errorf("%s runs %q after the upgrade", h, v)
		}
	}
	for _, n := range []string{"worker-0", "worker-1"} {
		if v := nodeVersion(n); !strings.HasPrefix(v, "26.05.") {
			t.Errorf("slurmctld says %s runs slurmd %q", n, v)
		}
	}
	cfg := login(t, ctx, c, "scontrol", "show", "config")
	if !strings.Contains(cfg, "SLURM_VERSION           = 26.05.") {
		t.Errorf("scontrol show config does not say 26.05:\n%s", firstLines(cfg, 5))
	}
	login(t, ctx, c, "srun", "--mpi=none", "-N2", "true")
	queued(held, "BeginTime")
	acct := login(t, ctx, c, "sacct", "-n", "-X", "-P", "-o", "JobID,State", "-S", "now-1hour")
	if got := strings.TrimSpace(login(t, ctx, c, "sacct", "-n", "-X", "-P", "-o", "State", "-j", held)); got != "PENDING" {
		t.Errorf("sacct says the held job is %q after the upgrade, want PENDING", got)
	}
	for _, want := range []string{finished + "|COMPLETED", running + "|COMPLETED", waiting + "|COMPLETED"} {
		if !strings.Contains(acct, want+"\n") {
			t.Errorf("sacct after the upgrade lacks %q:\n%s", want, acct)
		}
	}
	if n := strings.Count(acct, "|COMPLETED\n"); n != 4 {
		t.Errorf("sacct after the upgrade lists %d completed jobs, want 4 (one before, two across, one after):\n%s", n, acct)
	}
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, "\n")
}

const acctHost = "demo-accounting-0"

// nextRootFS is the Slurm 26.05 root file system (SLURM_ROOTFS_NEXT); the test is skipped
// without it.
func nextRootFS(t *testing.T) string {
	t.Helper()
	next := os.Getenv("SLURM_ROOTFS_NEXT")
	if next == "" {
		t.Skip("SLURM_ROOTFS_NEXT is not set: run 'make test' (hack/slurm-rootfs.sh --release 26.05 builds it)")
	}
	if data, err := os.ReadFile(filepath.Join(next, "etc/slurm-rootfs-version")); err != nil || !strings.Contains(string(data), "slurmctld=26.05.") {
		t.Fatalf("SLURM_ROOTFS_NEXT=%s is not a Slurm 26.05 root file system (%v):\n%s", next, err, data)
	}
	return next
}

func scontrolVersion(t testing.TB, ctx context.Context, c *slurmharness.Cluster, host string) string {
	t.Helper()
	out, err := c.Exec(ctx, host, "scontrol", "--version")
	if err != nil {
		t.Fatalf("scontrol --version on %s: %v", host, err)
	}
	return strings.TrimSpace(out)
}

// TestGoingBackToTheBackup follows the runbook of docs/upgrades.md ("Going back to the backup")
// after slurmdbd and slurmctld were upgraded to 26.05: both stopped, the backup's dump loaded
// into an emptied database, the state folder replaced by the backup's copy, both started on
// 24.11 again. Expected, written first: they start; the job held before the backup is queued
// again with its id and reason, the job finished before it is in sacct, and the job submitted
// after it is gone.
func TestGoingBackToTheBackup(t *testing.T) {
	next := nextRootFS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := render(t, spec(t, 1))
	c := startCluster(t, ctx, r, 1)
	submit := func() string {
		t.Helper()
		return strings.TrimSpace(login(t, ctx, c, "sbatch", "--parsable", "--begin=now+1hour", "--wrap", "true"))
	}
	login(t, ctx, c, "srun", "-N1", "true")
	finished := strings.TrimSpace(login(t, ctx, c, "sacct", "-n", "-X", "-P", "-o", "JobID", "-S", "now-1hour"))
	stateTime := func() string {
		out, _ := c.Exec(ctx, ctlHost, "stat", "-c", "%y", "/var/spool/slurmctld/job_state")
		return out
	}
	saved := stateTime()
	held := submit()
	// slurmctld saves its state a moment after a change: the backup copies what it saved.
	if err := c.WaitFor(ctx, "slurmctld to save the held job", func() (bool, error) { return stateTime() != saved, nil }); err != nil {
		t.Fatal(err)
	}
	dir := checkUpgradeBackup(t, ctx, c, r, acctHost)
	for _, h := range []string{acctHost, ctlHost} {
		if err := c.ReplaceHost(ctx, h, next, 30*time.Second); err != nil {
			t.Fatalf("upgrade %s: %v", h, err)
		}
	}
	after := submit()
	if v := scontrolVersion(t, ctx, c, ctlHost); !strings.Contains(v, " 26.05.") {
		t.Fatalf("the controller runs %q after its upgrade", v)
	}

	// The runbook: stop both, restore the database and the state, start the old release.
	for _, d := range [][2]string{{ctlHost, slurmharness.Slurmctld}, {acctHost, slurmharness.Slurmdbd}} {
		if err := c.StopDaemon(ctx, d[0], d[1], 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	const restoreDB = `set -e
mariadb --no-defaults --socket=/run/mysqld/mysqld.sock -u root -e 'DROP DATABASE slurm_acct_db; CREATE DATABASE slurm_acct_db'
mariadb --no-defaults --socket=/run/mysqld/mysqld.sock -u root slurm_acct_db < "$1/accounting.sql"`
	if out, err := c.Exec(ctx, acctHost, "sh", "-c", restoreDB, "sh", dir); err != nil {
		t.Fatalf("restore the database: %v\n%s", err, out)
	}
	const restoreState = `set -e
cd /var/spool/slurmctld && mkdir /tmp/spool-new && find . -mindepth 1 -maxdepth 1 -exec mv -t /tmp/spool-new/ {} + && cp -a "$1/statesave/." .`
	if out, err := c.Exec(ctx, ctlHost, "sh", "-c", restoreState, "sh", dir); err != nil {
		t.Fatalf("restore the state: %v\n%s", err, out)
	}
	root := os.Getenv("SLURM_ROOTFS")
	for _, h := range []string{acctHost, ctlHost} {
		if err := c.ReplaceHost(ctx, h, root, 30*time.Second); err != nil {
			t.Fatalf("start %s on 24.11 again: %v", h, err)
		}
	}
	if v := scontrolVersion(t, ctx, c, ctlHost); !strings.Contains(v, " 24.11.") {
		t.Fatalf("the controller runs %q after going back", v)
	}
	if got := strings.TrimSpace(login(t, ctx, c, "squeue", "-h", "-j", held, "-o", "%i %T %r")); got != held+" PENDING BeginTime" {
		t.Errorf("the job held before the backup is %q after going back", got)
	}
	if out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-j", after, "-o", "%i %T"); err == nil && strings.TrimSpace(out) != "" {
		t.Errorf("the job submitted after the backup is still there: %q", out)
	}
	if got := strings.TrimSpace(login(t, ctx, c, "sacct", "-n", "-X", "-P", "-o", "State", "-j", finished)); got != "COMPLETED" {
		t.Errorf("sacct says %q of the job finished before the backup", got)
	}
	login(t, ctx, c, "srun", "-N1", "true")
}

// checkUpgradeBackup runs the backup Job's script (backup.Script) on the controller host,
// which has the state at StateSaveLocation and reaches the database by the Service name in
// slurmdbd.conf, as the Job's pod does; then loads the dump into a new database on the
// accounting host and compares its job rows with the live ones, and checks the state copy and
// the checksums. It returns the backup's folder.
func checkUpgradeBackup(t *testing.T, ctx context.Context, c *slurmharness.Cluster, r rendered, acctHost string) string {
	t.Helper()
	shared := c.SharedDir()
	if err := os.MkdirAll(filepath.Join(shared, "backup"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "slurmdbd.conf"), r.slurmdbd, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := c.Exec(ctx, ctlHost, "env", "BACKUP=/shared/backup", "CLUSTER=demo", "FROM=24.11", "TO=26.05",
		"DBD_CONF=/shared/slurmdbd.conf", "STATE=/var/spool/slurmctld", "/bin/sh", "-c", backup.Script)
	if err != nil {
		t.Fatalf("the backup script: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`backup written to (/shared/backup/demo/\d{8}T\d{6}Z-slurm-24\.11-to-26\.05) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the backup script did not say where it wrote:\n%s", out)
	}
	dir := m[1]
	if out, err := c.Exec(ctx, ctlHost, "sh", "-c", `cd "$1" && sha256sum -c --quiet SHA256SUMS && stat -c '%U %n' statesave/job_state statesave/node_state`, "sh", dir); err != nil ||
		out != "slurm statesave/job_state\nslurm statesave/node_state\n" {
		t.Fatalf("the backup's checksums or state copy (%v):\n%s", err, out)
	}
	sql := func(q string) string {
		t.Helper()
		out, err := c.Exec(ctx, acctHost, "mariadb", "--no-defaults", "--socket=/run/mysqld/mysqld.sock", "-u", "root", "-N", "-B", "-e", q)
		if err != nil {
			t.Fatalf("%s: %v\n%s", q, err, out)
		}
		return strings.TrimSpace(out)
	}
	sql("CREATE DATABASE restore_check")
	if out, err := c.Exec(ctx, acctHost, "sh", "-c", `mariadb --no-defaults --socket=/run/mysqld/mysqld.sock -u root restore_check < "$1"/accounting.sql`, "sh", dir); err != nil {
		t.Fatalf("loading the dump: %v\n%s", err, out)
	}
	live, restored := sql("SELECT COUNT(*) FROM slurm_acct_db.demo_job_table"), sql("SELECT COUNT(*) FROM restore_check.demo_job_table")
	if live == "0" || live != restored {
		t.Fatalf("the dump holds %s job rows, the database %s", restored, live)
	}
	sql("DROP DATABASE restore_check")
	return dir
}

// checkScheduledBackups runs the script as the scheduled backups' CronJob runs it (NAME=scheduled,
// KEEP), twice with KEEP=1, against the same real database and state: the second run leaves
// only its own scheduled backup, whole, and the backup before the upgrade (upgradeDir) stays.
func checkScheduledBackups(t *testing.T, ctx context.Context, c *slurmharness.Cluster, upgradeDir string) {
	t.Helper()
	var dirs []string
	for i := 0; i < 2; i++ {
		out, err := c.Exec(ctx, ctlHost, "env", "BACKUP=/shared/backup", "CLUSTER=demo", "NAME=scheduled", "KEEP=1",
			"DBD_CONF=/shared/slurmdbd.conf", "STATE=/var/spool/slurmctld", "/bin/sh", "-c", backup.Script)
		if err != nil {
			t.Fatalf("the scheduled backup, run %d: %v\n%s", i+1, err, out)
		}
		m := regexp.MustCompile(`backup written to (/shared/backup/demo/\d{8}T\d{6}Z-scheduled) `).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("the scheduled backup did not say where it wrote:\n%s", out)
		}
		dirs = append(dirs, m[1])
		if i == 1 && !strings.Contains(out, "deleting "+dirs[0]+" (keeping the 1 newest)") {
			t.Errorf("the second scheduled backup did not delete the first:\n%s", out)
		}
	}
	out, err := c.Exec(ctx, ctlHost, "sh", "-c", `ls -d /shared/backup/demo/*; cd "$1" && sha256sum -c --quiet SHA256SUMS && tail -n 1 accounting.sql`, "sh", dirs[1])
	want := upgradeDir + "\n" + dirs[1] + "\n-- Dump completed"
	if err != nil || !strings.HasPrefix(out, want) {
		t.Errorf("after two scheduled backups with KEEP=1 (%v):\n%s\nwant the backup before the upgrade and the second scheduled one, whole", err, out)
	}
}
