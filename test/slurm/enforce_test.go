package slurm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// With accounting.enforce, slurmctld holds jobs to what sacctmgr records: a user without an
// association cannot submit, a QOS limit keeps a second job pending, and an association's own
// limit does too. Without it the same limits are recorded and ignored (docs/accounting.md).
func TestAccountingEnforceHoldsJobsToTheirLimits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc := spec(t, 1)
	sc.Spec.SlurmNodes.Accounting.Enforce = []slurmv1alpha1.AccountingEnforce{"associations", "limits", "qos"}
	r := render(t, sc)
	if !strings.Contains(string(r.files["slurm-base.conf"]), "AccountingStorageEnforce=associations,limits,qos\n") {
		t.Fatalf("slurm-base.conf lacks the enforcement:\n%s", r.files["slurm-base.conf"])
	}
	c := startCluster(t, ctx, r, 1)

	// alice exists on the login node and for slurmctld, with no association.
	for _, h := range []string{ctlHost, loginHost} {
		if _, err := c.Exec(ctx, h, "sh", "-c", "id alice || useradd -u 2001 -m alice"); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.Exec(ctx, loginHost, "su", "alice", "-c", "sbatch --wrap 'sleep 1'")
	if err == nil || !strings.Contains(out+err.Error(), "Invalid account") {
		t.Fatalf("alice without an association submitted: %v\n%s", err, out)
	}
	t.Logf("alice without an association: %s", strings.TrimSpace(firstLine(out+err.Error(), "Invalid account")))

	// The one command docs/accounting.md gives, then a QOS that allows one job per user.
	login(t, ctx, c, "sacctmgr", "-i", "add", "user", "alice", "account=root")
	login(t, ctx, c, "sacctmgr", "-i", "add", "qos", "one", "MaxJobsPerUser=1")
	login(t, ctx, c, "sacctmgr", "-i", "modify", "user", "alice", "set", "qos+=one")
	var ids []string
	for range 2 {
		if err := c.WaitFor(ctx, "alice's job accepted", func() (bool, error) {
			out, err := c.Exec(ctx, loginHost, "su", "alice", "-c", "sbatch --parsable --qos=one -c 1 --mem=100M --wrap 'sleep 120'")
			if err == nil {
				ids = append(ids, strings.TrimSpace(out))
			}
			return err == nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitRunning(t, ctx, c, ids[0])
	if err := c.WaitFor(ctx, "the second job held by the QOS", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-j", ids[1], "-o", "%T %r")
		return err == nil && strings.TrimSpace(out) == "PENDING QOSMaxJobsPerUserLimit", nil
	}); err != nil {
		out, _ := c.Exec(ctx, loginHost, "squeue", "-o", "%i %u %q %T %r")
		t.Fatalf("%v\n%s", err, out)
	}
	login(t, ctx, c, "scancel", "-u", "alice")

	// An association's own limit: root may run one job at a time.
	login(t, ctx, c, "sacctmgr", "-i", "modify", "user", "root", "set", "MaxJobs=1")
	first := sbatch(t, ctx, c, "-c", "1", "--mem=100M", "--wrap", "sleep 120")
	waitRunning(t, ctx, c, first)
	second := sbatch(t, ctx, c, "-c", "1", "--mem=100M", "--wrap", "sleep 1")
	if err := c.WaitFor(ctx, "root's second job held by its association", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-j", second, "-o", "%T %r")
		return err == nil && strings.TrimSpace(out) == "PENDING AssocMaxJobsLimit", nil
	}); err != nil {
		out, _ := c.Exec(ctx, loginHost, "squeue", "-o", "%i %u %T %r")
		t.Fatalf("%v\n%s", err, out)
	}
}

func firstLine(s, with string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, with) {
			return l
		}
	}
	return s
}
