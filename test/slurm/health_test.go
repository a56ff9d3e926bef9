package slurm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// fakeNvidiaSMI makes nvidia-smi on a worker list n GPUs (or fail when n < 0), standing in for
// the driver's tool.
func fakeNvidiaSMI(t *testing.T, ctx context.Context, c *slurmharness.Cluster, host string, n int) {
	t.Helper()
	script := "#!/bin/sh\n"
	if n < 0 {
		script += "echo 'NVIDIA-SMI has failed' >&2; exit 9\n"
	} else {
		script += fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo \"GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)\"; i=$((i+1)); done\n", n)
	}
	install := `printf '%s' "$1" > /usr/local/bin/nvidia-smi.new && chmod 755 /usr/local/bin/nvidia-smi.new && mv /usr/local/bin/nvidia-smi.new /usr/local/bin/nvidia-smi`
	if _, err := c.Exec(ctx, host, "sh", "-c", install, "sh", script); err != nil {
		t.Fatal(err)
	}
}

func TestHealthChecksDrainBrokenGPUNodesAndReturnThem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	plain := render(t, spec(t, 2))
	c := startCluster(t, ctx, plain, 2)
	for i := 0; i < 2; i++ {
		fakeNvidiaSMI(t, ctx, c, workerHost(i).Name, gpusPerWorker)
	}
	cl, err := slurmtest.StartRestd(ctx, c, ctlHost, plain.in.Cluster, plain.in.Keys.JWT)
	if err != nil {
		t.Fatal(err)
	}
	if err := slurmtest.StartReconfigureSidecar(ctx, c, ctlHost); err != nil {
		t.Fatal(err)
	}

	// Turn the checks on, as a user would in the spec: the sidecar reconfigures.
	withChecks := spec(t, 2)
	withChecks.Spec.PeriodicChecks = &slurmv1alpha1.PeriodicChecks{Enabled: true, IntervalSeconds: 10, Action: slurmv1alpha1.HealthActionDrain}
	r := render(t, withChecks)
	if !strings.Contains(string(r.files["slurm-base.conf"]), "HealthCheckProgram=/etc/slurm/slurm-node-health.sh") {
		t.Fatal("the health check is not rendered")
	}
	if err := c.UpdateSlurmFiles(r.files); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFor(ctx, "slurmctld runs the health check", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "scontrol", "show", "config")
		return err == nil && strings.Contains(out, "slurm-node-health.sh"), nil
	}); err != nil {
		t.Fatal(err)
	}

	node := func(name string) slurm.Node {
		n, err := cl.Node(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitNode := func(what string, cond func(slurm.Node, slurm.Node) bool) {
		t.Helper()
		if err := c.WaitFor(ctx, what, func() (bool, error) {
			return cond(node("worker-0"), node("worker-1")), nil
		}); err != nil {
			t.Fatalf("%v: worker-0 %v %q, worker-1 %v %q\n%s", err, node("worker-0").State, node("worker-0").Reason,
				node("worker-1").State, node("worker-1").Reason, c.Logs(workerHost(1).Name))
		}
	}

	t.Run("a worker that loses a GPU is drained with the operator's health reason", func(t *testing.T) {
		fakeNvidiaSMI(t, ctx, c, workerHost(1).Name, 1)
		waitNode("worker-1 drained by the health check", func(w0, w1 slurm.Node) bool {
			return w1.Has("DRAIN") && strings.HasPrefix(w1.Reason, slurmfacts.DrainHealth+" 1 of 2 GPUs visible")
		})
		if w0 := node("worker-0"); w0.Has("DRAIN") {
			t.Fatalf("the healthy worker-0 was drained: %q", w0.Reason)
		}
	})

	t.Run("an admin's drain is kept when the node breaks and when it heals", func(t *testing.T) {
		login(t, ctx, c, "scontrol", "update", "nodename=worker-0", "state=drain", "reason=maintenance window")
		fakeNvidiaSMI(t, ctx, c, workerHost(0).Name, -1)
		time.Sleep(12 * time.Second) // at least one health check interval
		if w0 := node("worker-0"); w0.Reason != "maintenance window" {
			t.Fatalf("the admin's reason was replaced: %q", w0.Reason)
		}
		fakeNvidiaSMI(t, ctx, c, workerHost(0).Name, gpusPerWorker)
		time.Sleep(12 * time.Second)
		if w0 := node("worker-0"); !w0.Has("DRAIN") || w0.Reason != "maintenance window" {
			t.Fatalf("the admin's drain was lifted: %v %q", w0.State, w0.Reason)
		}
	})

	t.Run("the healed worker returns to service by itself", func(t *testing.T) {
		fakeNvidiaSMI(t, ctx, c, workerHost(1).Name, gpusPerWorker)
		waitNode("worker-1 back in service", func(w0, w1 slurm.Node) bool {
			return !w1.Has("DRAIN") && w1.Has("IDLE")
		})
	})

	// A jail that shows more GPUs than the pod was given (another pod's, as a privileged
	// container sees its node's): the count is the pod's allocation, not the node's.
	t.Run("a worker whose jail shows another pod's GPU is drained, and returns when it is gone", func(t *testing.T) {
		if _, err := c.Exec(ctx, workerHost(1).Name, "mknod", "-m", "666", "/dev/nvidia2", "c", "195", "2"); err != nil {
			t.Fatal(err)
		}
		waitNode("worker-1 drained by the health check", func(_, w1 slurm.Node) bool {
			return w1.Has("DRAIN") && strings.HasPrefix(w1.Reason, slurmfacts.DrainHealth+" 3 of 2 GPU device files")
		})
		if _, err := c.Exec(ctx, workerHost(1).Name, "rm", "/dev/nvidia2"); err != nil {
			t.Fatal(err)
		}
		waitNode("worker-1 back in service", func(_, w1 slurm.Node) bool {
			return !w1.Has("DRAIN") && w1.Has("IDLE")
		})
	})

	// (An admin's DOWN on a node whose slurmd answers does not last: ReturnToService=2 returns
	// it at once. FAIL is how an admin takes a working node out for good.)
	t.Run("an admin's FAIL is neither drained over when the node breaks nor lifted when it heals", func(t *testing.T) {
		login(t, ctx, c, "scontrol", "update", "nodename=worker-1", "state=fail", "reason=fan failure")
		fakeNvidiaSMI(t, ctx, c, workerHost(1).Name, -1)
		time.Sleep(12 * time.Second)
		if w1 := node("worker-1"); w1.Reason != "fan failure" || !w1.Has("FAIL") {
			t.Fatalf("the admin's FAIL was changed: %v %q", w1.State, w1.Reason)
		}
		fakeNvidiaSMI(t, ctx, c, workerHost(1).Name, gpusPerWorker)
		time.Sleep(12 * time.Second)
		if w1 := node("worker-1"); w1.Reason != "fan failure" || !w1.Has("FAIL") {
			t.Fatalf("the admin's FAIL was lifted: %v %q", w1.State, w1.Reason)
		}
	})

	// The jail (the worker's root here) read-only, hung, or short of space: jobs there would
	// fail, so the node is drained naming what is wrong, and returns when it is mended.
	drainedFor := func(what, reason string) {
		t.Helper()
		waitNode("worker-1 drained: "+what, func(_, w1 slurm.Node) bool {
			return w1.Has("DRAIN") && strings.HasPrefix(w1.Reason, slurmfacts.DrainHealth) && strings.Contains(w1.Reason, reason)
		})
	}
	backInService := func() {
		t.Helper()
		waitNode("worker-1 back in service", func(_, w1 slurm.Node) bool { return !w1.Has("DRAIN") && w1.Has("IDLE") })
	}
	w1 := workerHost(1).Name
	t.Run("a worker whose jail turns read-only is drained, and returns when it is writable", func(t *testing.T) {
		login(t, ctx, c, "scontrol", "update", "nodename=worker-1", "state=resume")
		backInService()
		if _, err := c.Exec(ctx, w1, "mount", "-o", "remount,bind,ro", "/"); err != nil {
			t.Fatal(err)
		}
		drainedFor("read-only", "the jail is not writable")
		if _, err := c.Exec(ctx, w1, "mount", "-o", "remount,bind,rw", "/"); err != nil {
			t.Fatal(err)
		}
		backInService()
	})

	t.Run("a worker whose jail hangs is drained within the check's bound, and returns when it answers", func(t *testing.T) {
		// A write into a FIFO nobody reads blocks, as one on a hung NFS server does.
		if _, err := c.Exec(ctx, w1, "sh", "-c", "rm -f /var/lib/slurm-operator/health/worker-1.tmp && mkfifo /var/lib/slurm-operator/health/worker-1.tmp"); err != nil {
			t.Fatal(err)
		}
		drainedFor("hung", "the jail hangs")
		if _, err := c.Exec(ctx, w1, "sh", "-c", "timeout 3 cat /var/lib/slurm-operator/health/worker-1.tmp >/dev/null; rm -f /var/lib/slurm-operator/health/worker-1.tmp"); err != nil {
			t.Fatal(err)
		}
		backInService()
	})

	t.Run("a jail with less free space than jailMinFreeSpace drains the worker, which returns when the threshold is met", func(t *testing.T) {
		big := spec(t, 2)
		huge := resource.MustParse("100Pi")
		big.Spec.PeriodicChecks = &slurmv1alpha1.PeriodicChecks{Enabled: true, IntervalSeconds: 10, Action: slurmv1alpha1.HealthActionDrain, JailMinFreeSpace: &huge}
		if err := c.UpdateSlurmFiles(render(t, big).files); err != nil {
			t.Fatal(err)
		}
		drainedFor("full", "MiB free, less than 107374182400 MiB")
		if err := c.UpdateSlurmFiles(r.files); err != nil {
			t.Fatal(err)
		}
		backInService()
	})
}
