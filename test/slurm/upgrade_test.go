package slurm_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// TestUpgradeLosesNoJob upgrades a running 24.11 cluster to 26.05 in the order the operator
// keeps (docs/upgrades.md): slurmdbd, then slurmctld, then the workers drain-first, then the
// login node, each host replaced as Kubernetes replaces a pod with a new image, keeping only
// its volumes (the controller's StateSaveLocation, the database). Expected, written first:
//   - a job running across the slurmdbd and slurmctld upgrades keeps running and completes;
//   - a job waiting for resources runs once they free, on a 24.11 and a 26.05 worker at once;
//   - a job held for a later start time stays queued, with its id and reason;
//   - sacct still lists the job that ended before the upgrade;
//   - afterwards every daemon and command says 26.05.
func TestUpgradeLosesNoJob(t *testing.T) {
	next := os.Getenv("SLURM_ROOTFS_NEXT")
	if next == "" {
		t.Skip("SLURM_ROOTFS_NEXT is not set: run 'make test' (hack/slurm-rootfs.sh --release 26.05 builds it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := startCluster(t, ctx, render(t, spec(t, 2)), 2)
	const acctHost = "demo-accounting-0"
	versionOf := func(host string) string {
		t.Helper()
		out, err := c.Exec(ctx, host, "scontrol", "--version")
		if err != nil {
			t.Fatalf("scontrol --version on %s: %v", host, err)
		}
		return strings.TrimSpace(out)
	}
	if v := versionOf(loginHost); !strings.Contains(v, " 24.11.") {
		t.Fatalf("the cluster starts on %q, want 24.11", v)
	}
	if data, err := os.ReadFile(filepath.Join(next, "etc/slurm-rootfs-version")); err != nil || !strings.Contains(string(data), "slurmctld=26.05.") {
		t.Fatalf("SLURM_ROOTFS_NEXT=%s is not a Slurm 26.05 root file system (%v):\n%s", next, err, data)
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
