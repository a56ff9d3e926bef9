package slurm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/activecheck"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// checkRun drives the operator's active checks against a real slurmctld, one look at a time, as
// the controller does at each poll; now is the checks' clock (moved ahead to make a check due).
type checkRun struct {
	t      *testing.T
	ctx    context.Context
	c      *slurmharness.Cluster
	api    *slurm.Client
	state  *activecheck.State
	checks []activecheck.Check
	offset time.Duration
	taken  []activecheck.Result
}

func (r *checkRun) workers() []slurm.Node {
	nodes, err := r.api.Nodes(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []slurm.Node
	for _, n := range nodes {
		if strings.HasPrefix(n.Name, "worker-") {
			out = append(out, n)
		}
	}
	return out
}

func (r *checkRun) node(name string) slurm.Node {
	n, err := r.api.Node(r.ctx, name)
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// until looks again every two seconds until cond holds.
func (r *checkRun) until(what string, cond func() bool) {
	r.t.Helper()
	r.untilWithin(what, 0, cond)
}

// untilWithin is until, failing when cond does not hold within limit (0: the test's deadline).
func (r *checkRun) untilWithin(what string, limit time.Duration, cond func() bool) {
	r.t.Helper()
	ctx := r.ctx
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	if err := r.c.WaitFor(ctx, what, func() (bool, error) {
		got, err := r.state.Step(r.ctx, activecheck.SlurmOnly(r.api), r.checks, r.workers(), time.Now().Add(r.offset))
		if err != nil {
			r.t.Logf("step: %v", err)
		}
		r.taken = append(r.taken, got...)
		return cond(), nil
	}); err != nil {
		out, _ := r.c.Exec(r.ctx, loginHost, "sinfo", "-N", "-o", "%N %T %E")
		q, _ := r.c.Exec(r.ctx, loginHost, "squeue", "-a", "-o", "%i %j %T %R %k")
		r.t.Fatalf("%v\nsinfo:\n%s\nsqueue:\n%s\nresults: %+v", err, out, q, r.taken)
	}
}

// checkJobs are the check jobs sacct knows: ID, name, state, start, end and nodes.
func checkJobs(t *testing.T, ctx context.Context, c *slurmharness.Cluster) [][]string {
	t.Helper()
	out := login(t, ctx, c, "sacct", "-n", "-X", "-P", "-a", "--name", "slurm-operator-check-marker,slurm-operator-check-mpi", "-o", "JobID,JobName,State,Start,End,NodeList", "-S", "now-1hour")
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Split(l, "|"); len(f) == 6 {
			rows = append(rows, f)
		}
	}
	return rows
}

// A check that fails on one worker drains that worker alone, with the check's output; the
// next run that passes resumes it; an admin's drain is never lifted and no check runs there;
// no check runs on a worker while a user's job does. Then the MPI bandwidth check between
// pairs of workers drains the one whose network is throttled, as the outlier.
func TestActiveChecksDrainTheFailingWorkerAloneAndResumeItWhenItPasses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	sc := spec(t, 3)
	r := render(t, sc)
	c := startCluster(t, ctx, r, 3)
	api, err := slurmtest.StartRestd(ctx, c, ctlHost, r.in.Cluster, r.in.Keys.JWT)
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.ActiveChecks = []slurmv1alpha1.ActiveCheck{{
		Name:            "marker",
		Script:          "if [ -e /shared/broken-$SLURMD_NODENAME ]; then echo \"marker file says $SLURMD_NODENAME is broken\"; exit 3; fi\necho fine",
		IntervalMinutes: 5, TimeoutSeconds: 60,
	}}
	run := &checkRun{t: t, ctx: ctx, c: c, api: api, state: activecheck.NewState(), checks: activecheck.FromSpec(sc, 0)}

	// An admin's drain on worker-2, a user's job on worker-0, the marker on worker-1.
	login(t, ctx, c, "scontrol", "update", "nodename=worker-2", "state=drain", "reason=admin: fan replaced tomorrow")
	user := sbatch(t, ctx, c, "-w", "worker-0", "--wrap", "sleep 25")
	waitRunning(t, ctx, c, user)
	if err := os.WriteFile(filepath.Join(c.SharedDir(), "broken-worker-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run.until("worker-1 drained by the check", func() bool {
		n := run.node("worker-1")
		return n.Has("DRAIN") && strings.HasPrefix(n.Reason, "slurm-operator: check marker: ")
	})
	if n := run.node("worker-1"); n.Reason != "slurm-operator: check marker: marker file says worker-1 is broken" {
		t.Errorf("worker-1's reason: %q", n.Reason)
	}
	run.until("the check passed on worker-0 after the user's job", func() bool {
		for _, res := range run.taken {
			if res.Node == "worker-0" && res.Passed && res.Output == "fine" {
				return true
			}
		}
		return false
	})
	if n := run.node("worker-0"); n.Has("DRAIN") {
		t.Errorf("worker-0 drained: %v %q", n.State, n.Reason)
	}
	var userEnd string
	out := login(t, ctx, c, "sacct", "-n", "-X", "-P", "-j", user, "-o", "State,End")
	if f := strings.Split(strings.TrimSpace(out), "|"); len(f) == 2 && f[0] == "COMPLETED" {
		userEnd = f[1]
	} else {
		t.Fatalf("the user's job: %q", out)
	}
	for _, j := range checkJobs(t, ctx, c) {
		if strings.Contains(j[5], "worker-2") {
			t.Errorf("a check ran on worker-2, which an admin drained: %v", j)
		}
		if strings.Contains(j[5], "worker-0") && j[3] < userEnd {
			t.Errorf("a check started on worker-0 at %s, before the user's job %s ended at %s: %v", j[3], user, userEnd, j)
		}
	}

	// The operator restarts during worker-1's re-check: one look queues the re-check and
	// resumes worker-1 for it, then the State is lost. The new one, seeded as the controller
	// seeds it (from the status's last run: nothing due for an interval), takes the job in from
	// slurmctld's job list and drains worker-1 again when it fails; a State that did not would
	// leave the broken worker-1 in service until its next interval, five minutes on (longer
	// than the two this step may take), and queue a second run there then.
	onWorker1 := func() (n int) {
		for _, j := range checkJobs(t, ctx, c) {
			if j[5] == "worker-1" {
				n++
			}
		}
		return n
	}
	before := onWorker1() + 1
	run.offset = 6 * time.Minute
	run.until("worker-1's re-check queued", func() bool { return true })
	if n := run.node("worker-1"); n.Has("DRAIN") {
		t.Fatalf("worker-1 was not resumed for its re-check: %v %q", n.State, n.Reason)
	}
	if err := c.WaitFor(ctx, "sacct to show worker-1's re-check", func() (bool, error) { return onWorker1() == before, nil }); err != nil {
		t.Fatal(err)
	}
	run.state, run.taken = activecheck.NewState(), nil
	run.state.Seed("marker", time.Now().Add(run.offset))
	run.untilWithin("worker-1 drained again by its re-check, read after the restart", 2*time.Minute, func() bool {
		n := run.node("worker-1")
		return n.Has("DRAIN") && n.Reason == "slurm-operator: check marker: marker file says worker-1 is broken"
	})
	t.Logf("the results taken after the restart: %+v", run.taken)
	failed := false
	for _, res := range run.taken {
		failed = failed || res.Node == "worker-1" && !res.Passed
	}
	if !failed {
		t.Errorf("no failure of worker-1 among the results taken after the restart: %+v", run.taken)
	}
	if after := onWorker1(); after != before {
		t.Errorf("check jobs on worker-1: %d before the restart, %d after: a second run was queued beside the one taken in", before, after)
	}

	// Mended, and the interval later: the next run passes and returns worker-1.
	if err := os.Remove(filepath.Join(c.SharedDir(), "broken-worker-1")); err != nil {
		t.Fatal(err)
	}
	run.offset, run.taken = 12*time.Minute, nil
	run.until("the check passed on worker-1", func() bool {
		for _, res := range run.taken {
			if res.Node == "worker-1" && res.Passed && res.Output == "fine" {
				return true
			}
		}
		return false
	})
	if n := run.node("worker-1"); n.Has("DRAIN") || !n.Has("IDLE") {
		t.Errorf("worker-1 is not back in service: %v %q", n.State, n.Reason)
	}
	if n := run.node("worker-2"); !n.Has("DRAIN") || n.Reason != "admin: fan replaced tomorrow" {
		t.Errorf("the admin's drain on worker-2: %v %q", n.State, n.Reason)
	}
	st := run.state.Status(run.checks, []string{"worker-0", "worker-1", "worker-2"})
	if len(st) != 1 || st[0].Passed != 2 || len(st[0].Failing) != 0 || st[0].NextRunTime == nil {
		t.Errorf("status: %+v", st)
	}

	// The bandwidth check: worker-2 back from the admin's drain, its network throttled.
	login(t, ctx, c, "scontrol", "update", "nodename=worker-2", "state=resume")
	if _, err := c.Exec(ctx, workerHost(2).Name, "sh", "-c",
		"for d in $(ip -o -4 addr show | awk '$2 != \"lo\" {print $2}'); do tc qdisc add dev $d root tbf rate 100mbit burst 64kb latency 400ms || exit 1; done"); err != nil {
		t.Fatal(err)
	}
	// All three idle first: a round takes the workers that are idle when it starts, and a round
	// of two (a marker check's job still on one) cannot tell which of them is slow.
	if err := c.WaitFor(ctx, "every worker idle before the bandwidth round", func() (bool, error) {
		for _, w := range []string{"worker-0", "worker-1", "worker-2"} {
			if n := run.node(w); !n.Has("IDLE") || n.Has("DRAIN") {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		out, _ := c.Exec(ctx, loginHost, "sinfo", "-N", "-o", "%N %T %E")
		t.Fatalf("%v\n%s", err, out)
	}
	sc.Spec.ActiveChecks = []slurmv1alpha1.ActiveCheck{{Name: "mpi", Program: slurmv1alpha1.ActiveCheckMPIAllReduce, TimeoutSeconds: 120}}
	run.checks, run.offset = activecheck.FromSpec(sc, 0), 0
	run.until("worker-2 drained as the slow one", func() bool {
		n := run.node("worker-2")
		return n.Has("DRAIN") && strings.HasPrefix(n.Reason, "slurm-operator: check mpi: ")
	})
	t.Logf("worker-2: %s", run.node("worker-2").Reason)
	for _, w := range []string{"worker-0", "worker-1"} {
		if n := run.node(w); n.Has("DRAIN") {
			t.Errorf("%s drained: %q", w, n.Reason)
		}
	}
	t.Logf("the check jobs:\n%v", checkJobs(t, ctx, c))

	// The jail's write check as the job's user, on the real root, asking for more free space
	// than there is: onFailure Comment comments every worker and drains none. The mpi check
	// left the spec, so its drain on worker-2 is lifted.
	floor := resource.MustParse("100Pi")
	sc.Spec.PeriodicChecks = &slurmv1alpha1.PeriodicChecks{JailMinFreeSpace: &floor}
	sc.Spec.ActiveChecks = []slurmv1alpha1.ActiveCheck{{Name: "jail", Program: slurmv1alpha1.ActiveCheckJailWritable,
		OnFailure: slurmv1alpha1.ActiveCheckComment, TimeoutSeconds: 60}}
	run.checks = activecheck.FromSpec(sc, 0)
	run.until("every worker commented by the jail check", func() bool {
		for _, w := range []string{"worker-0", "worker-1", "worker-2"} {
			if !strings.HasPrefix(run.node(w).Comment, "slurm-operator check jail failed: the jail has ") {
				return false
			}
		}
		return true
	})
	t.Logf("worker-0's comment: %s", run.node("worker-0").Comment)
	for _, w := range []string{"worker-0", "worker-1", "worker-2"} {
		if n := run.node(w); n.Has("DRAIN") {
			t.Errorf("%s drained by a check that only comments, or by the check taken out: %q", w, n.Reason)
		}
	}
}
