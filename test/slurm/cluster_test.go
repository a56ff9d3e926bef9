// Package slurm_test runs real Slurm daemons (slurmctld, slurmd, slurmdbd, slurmrestd, munged,
// MariaDB; Slurm 24.11, and 26.05 for the upgrade) on the exact bytes the operator renders, one
// network namespace per Slurm node, and checks what a user and the operator see. See
// docs/testing.md.
package slurm_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

func TestTheRenderedConfigRunsARealCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	r := render(t, spec(t, 3))
	c := startCluster(t, ctx, r, 3)

	t.Run("sinfo shows every worker idle in the default partition", func(t *testing.T) {
		nodes := sinfoNodes(t, ctx, c)
		for i := 0; i < 3; i++ {
			if got := nodes[fmt.Sprintf("worker-%d", i)]; got != "idle main*" {
				t.Errorf("worker-%d: %q, want idle in main*; sinfo: %v", i, got, nodes)
			}
		}
	})

	t.Run("srun -N3 hostname from the login node runs on three workers", func(t *testing.T) {
		out := login(t, ctx, c, "srun", "-N3", "hostname")
		hosts := strings.Fields(out)
		sort.Strings(hosts)
		want := []string{"demo-worker-0", "demo-worker-1", "demo-worker-2"}
		if strings.Join(hosts, " ") != strings.Join(want, " ") {
			t.Fatalf("srun -N3 hostname printed %q", out)
		}
	})

	t.Run("the user's extra line is in force", func(t *testing.T) {
		out := login(t, ctx, c, "scontrol", "show", "config")
		if !strings.Contains(out, "bf_interval=5") {
			t.Fatalf("SchedulerParameters from extraSlurmConf not in force")
		}
		if !strings.Contains(out, "ClusterName             = demo") {
			t.Fatalf("ClusterName not demo")
		}
	})

	t.Run("gres from the GPU labels: one GPU is granted, three are refused", func(t *testing.T) {
		out := login(t, ctx, c, "srun", "-N1", "--gres=gpu:h100:1", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
		if strings.TrimSpace(out) != "0" {
			t.Fatalf("CUDA_VISIBLE_DEVICES = %q, want 0", out)
		}
		out = login(t, ctx, c, "srun", "-N1", "--gres=gpu:2", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
		if strings.TrimSpace(out) != "0,1" {
			t.Fatalf("CUDA_VISIBLE_DEVICES = %q, want 0,1", out)
		}
		if out, err := c.Exec(ctx, loginHost, "srun", "-N1", "--gres=gpu:3", "--immediate=5", "true"); err == nil {
			t.Fatalf("srun --gres=gpu:3 was accepted on a 2-GPU worker: %s", out)
		}
	})

	t.Run("jobs that ask for GPUs only: two one-GPU jobs share a worker, one with every GPU gets the whole node", func(t *testing.T) {
		cfg := login(t, ctx, c, "scontrol", "show", "config")
		for _, want := range []string{"JobDefaults             = DefCpuPerGPU=1", "DefMemPerCPU            = 1536"} {
			if !strings.Contains(cfg, want) {
				t.Fatalf("%q not in force:\n%s", want, cfg)
			}
		}
		a := sbatch(t, ctx, c, "-w", "worker-0", "--gres=gpu:1", "--wrap", "sleep 120")
		b := sbatch(t, ctx, c, "-w", "worker-0", "--gres=gpu:1", "--wrap", "sleep 120")
		defer func() { _, _ = c.Exec(ctx, loginHost, "scancel", a, b) }()
		if err := c.WaitFor(ctx, "both one-GPU jobs running on worker-0", func() (bool, error) {
			out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-j", a+","+b, "-o", "%T")
			return err == nil && strings.Join(strings.Fields(out), " ") == "RUNNING RUNNING", nil
		}); err != nil {
			out, _ := c.Exec(ctx, loginHost, "squeue", "-j", a+","+b, "-o", "%i %T %r")
			t.Fatalf("%v: %s", err, out)
		}
		// The whole node: 2 CPUs and RealMemory (3072 MiB, shown as 3G).
		out := login(t, ctx, c, "srun", "-w", "worker-1", "--gres=gpu:2", "--immediate=30", "sh", "-c", "scontrol show job $SLURM_JOB_ID")
		if !strings.Contains(out, "AllocTRES=cpu=2,mem=3G,") {
			t.Fatalf("a job with every GPU of worker-1 did not get the whole node (cpu=2,mem=3G):\n%s", out)
		}
	})

	t.Run("a job's locked-memory limit is slurmd's, not the submitting shell's", func(t *testing.T) {
		out := login(t, ctx, c, "sh", "-c", "ulimit -l 64; srun -N1 sh -c 'ulimit -l'")
		if strings.TrimSpace(out) == "64" {
			t.Fatalf("the job inherited the login shell's 64 KiB locked-memory limit: RDMA would fail (PropagateResourceLimitsExcept=MEMLOCK not in force)")
		}
	})

	t.Run("sbatch, then sacct through slurmdbd and MariaDB shows COMPLETED and the exit code", func(t *testing.T) {
		ok := sbatch(t, ctx, c, "--wrap", "echo hello")
		bad := sbatch(t, ctx, c, "--wrap", "exit 3")
		failedOnPurpose = bad
		waitJob(t, ctx, c, ok, "COMPLETED")
		waitJob(t, ctx, c, bad, "FAILED")
		out := login(t, ctx, c, "sacct", "-n", "-X", "-P", "-j", bad, "-o", "ExitCode")
		if strings.TrimSpace(out) != "3:0" {
			t.Fatalf("exit code %q, want 3:0", out)
		}
	})

	cl, err := slurmtest.StartRestd(ctx, c, ctlHost, r.in.Cluster, r.in.Keys.JWT)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Logs(ctlHost))
	}
	// The controller pod's reconfigure sidecar, as rendered: it reconfigures when the files change.
	if err := slurmtest.StartReconfigureSidecar(ctx, c, ctlHost); err != nil {
		t.Fatal(err)
	}

	t.Run("the operator's client lifts only its own drains", func(t *testing.T) {
		login(t, ctx, c, "scontrol", "update", "nodename=worker-1", "state=drain", "reason=bad DIMM, ticket 4711")
		if err := cl.Drain(ctx, "worker-2", slurmfacts.DrainHealth+" test"); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"worker-1", "worker-2"} {
			lifted, err := cl.ResumeIfOwned(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if lifted != (n == "worker-2") {
				t.Errorf("%s: lifted = %v", n, lifted)
			}
		}
		if err := c.WaitFor(ctx, "worker-2 idle, worker-1 still drained", func() (bool, error) {
			w1, err1 := cl.Node(ctx, "worker-1")
			w2, err2 := cl.Node(ctx, "worker-2")
			if err1 != nil || err2 != nil {
				return false, nil
			}
			return w1.Has("DRAIN") && w1.Reason == "bad DIMM, ticket 4711" && !w2.Has("DRAIN") && w2.Has("IDLE"), nil
		}); err != nil {
			t.Fatal(err)
		}
		login(t, ctx, c, "scontrol", "update", "nodename=worker-1", "state=resume")
	})

	t.Run("a worker's preStop drains its node, waits while its job runs and ends with the job", func(t *testing.T) {
		job := sbatch(t, ctx, c, "-w", "worker-2", "--wrap", "sleep 15")
		waitRunning(t, ctx, c, job)
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := c.Exec(ctx, workerHost(2).Name, "env", "SLURM_NODE_NAME=worker-2", "/bin/sh", "-c", worker.PreStopScript)
			done <- result{out, err}
		}()
		if err := c.WaitFor(ctx, "worker-2 drained by its preStop", func() (bool, error) {
			n, err := cl.Node(ctx, "worker-2")
			return err == nil && n.Has("DRAIN") && strings.HasPrefix(n.Reason, slurmfacts.DrainPodStopping), nil
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			t.Fatalf("the preStop ended while job %s runs on its node: %v\n%s", job, r.err, r.out)
		default:
		}
		waitJob(t, ctx, c, job, "COMPLETED")
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("preStop: %v\n%s", r.err, r.out)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the preStop did not end within 30 s of job %s's end", job)
		}
		login(t, ctx, c, "scontrol", "update", "nodename=worker-2", "state=resume")
	})

	t.Run("scale up 3 → 4: the sidecar reconfigures, the new node joins idle, slurmctld keeps its PID, a running job completes", func(t *testing.T) {
		pid := c.PID(ctlHost, slurmharness.Slurmctld)
		job := sbatch(t, ctx, c, "-w", "worker-0", "--wrap", "sleep 8")
		waitRunning(t, ctx, c, job)
		up := render(t, spec(t, 4))
		if err := c.UpdateSlurmFiles(up.files); err != nil {
			t.Fatal(err)
		}
		// No explicit reconfigure: the sidecar notices the new files, and waits for the new
		// worker's name to resolve before it reconfigures (slurmctld drops a node whose
		// address does not). The new worker's script starts slurmd once slurmctld lists it.
		// worker-3's host has three GPUs, and its pod was given the second and third (as the
		// device plugin gives a pod part of a node): slurmd must offer those two alone.
		w3 := workerHost(3)
		w3.GPUs = 3
		w3.RunFiles = entrypointRunFiles(t, up.in, []int{1, 2}, 0, 1, 2)
		if err := c.AddWorker(ctx, w3); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitFor(ctx, "worker-3 idle", func() (bool, error) {
			n, err := cl.Node(ctx, "worker-3")
			return err == nil && n.Has("IDLE") && !n.Has("DRAIN") && !n.Down(), nil
		}); err != nil {
			t.Fatalf("%v\n%s", err, c.Logs(ctlHost))
		}
		if got := c.PID(ctlHost, slurmharness.Slurmctld); got != pid {
			t.Fatalf("slurmctld PID changed %d → %d", pid, got)
		}
		// The running workers got the new node list from slurmctld with the reconfigure
		// (configless), not from their own copy of the files.
		cached, err := c.Exec(ctx, "demo-worker-0", "cat", slurmfacts.SlurmdSpoolDir+"/conf-cache/slurm-base.conf")
		if err != nil || !strings.Contains(cached, "NodeName=worker-[0-3] ") {
			t.Fatalf("worker-0's config from slurmctld lacks worker-3: %v\n%s", err, cached)
		}
		waitJob(t, ctx, c, job, "COMPLETED")
		out := login(t, ctx, c, "srun", "-w", "worker-3", "--gres=gpu:2", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
		if strings.TrimSpace(out) != "0,1" {
			t.Fatalf("on worker-3: CUDA_VISIBLE_DEVICES = %q", out)
		}
		// A one-GPU job gets the pod's first GPU, /dev/nvidia1: the device cgroup lets it open
		// that one (the stand-in has no driver: "No such device"), not the pod's other.
		out, _ = c.Exec(ctx, loginHost, "srun", "-w", "worker-3", "--gres=gpu:1", "sh", "-c",
			"for d in 1 2; do echo nvidia$d: $(head -c1 /dev/nvidia$d 2>&1 | sed 's/.*: //'); done")
		if !strings.Contains(out, "nvidia1: No such device") || !strings.Contains(out, "nvidia2: Operation not permitted") {
			t.Fatalf("a one-GPU job on worker-3 (pod given /dev/nvidia1 and /dev/nvidia2) saw:\n%s", out)
		}
	})

	t.Run("scale down 4 → 3 as the operator does it: drain, wait for the job, remove, reconfigure through slurmrestd", func(t *testing.T) {
		job := sbatch(t, ctx, c, "-w", "worker-3", "--wrap", "sleep 5")
		waitRunning(t, ctx, c, job)
		if err := cl.Drain(ctx, "worker-3", slurmfacts.DrainScaleDown); err != nil {
			t.Fatal(err)
		}
		n, err := cl.Node(ctx, "worker-3")
		if err != nil {
			t.Fatal(err)
		}
		if n.Drained() {
			t.Fatalf("worker-3 counts as drained while its job runs: %v", n.State)
		}
		if ids, err := cl.RunningOn(ctx, "worker-3"); err != nil || len(ids) != 1 {
			t.Fatalf("running jobs on worker-3: %v, %v", ids, err)
		}
		if err := c.WaitFor(ctx, "worker-3 drained", func() (bool, error) {
			n, err := cl.Node(ctx, "worker-3")
			return err == nil && n.Drained(), nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.StopWorker(ctx, "demo-worker-3"); err != nil {
			t.Fatal(err)
		}
		down := render(t, spec(t, 3))
		if err := c.UpdateSlurmFiles(down.files); err != nil {
			t.Fatal(err)
		}
		if err := cl.Reconfigure(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitFor(ctx, "worker-3 gone from sinfo", func() (bool, error) {
			_, still := sinfoNodes(t, ctx, c)["worker-3"]
			return !still, nil
		}); err != nil {
			t.Fatal(err)
		}
		// The pod of a node slurmctld no longer lists stops at once: its preStop has nothing
		// to wait for (run on another worker's host: worker-3's is gone).
		start := time.Now()
		if out, err := c.Exec(ctx, "demo-worker-0", "env", "SLURM_NODE_NAME=worker-3", "/bin/sh", "-c", worker.PreStopScript); err != nil ||
			!strings.Contains(out, "slurmctld lists no node worker-3") || time.Since(start) > 20*time.Second {
			t.Errorf("the preStop of a node slurmctld does not list: %v after %s\n%s", err, time.Since(start).Round(time.Second), out)
		}
		waitJob(t, ctx, c, job, "COMPLETED")
		out := login(t, ctx, c, "sacct", "-n", "-X", "-P", "-a", "-o", "JobID,State", "-s", "F,NF,CA,TO,OOM")
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if l != "" && !strings.HasPrefix(l, failedOnPurpose+"|") {
				t.Errorf("a job failed during the scale-down: %s", l)
			}
		}
		// After a reconfigure, slurmd re-executes and registers again: wait for that.
		var last []slurm.Node
		if err := c.WaitFor(ctx, "three idle workers", func() (bool, error) {
			nodes, err := cl.Nodes(ctx)
			if err != nil {
				return false, nil
			}
			last = nodes
			return len(nodes) == 3 && slurm.Count(nodes).Idle == 3, nil
		}); err != nil {
			t.Fatalf("%v: %+v", err, last)
		}
	})
}

// failedOnPurpose is the ID of the job the sbatch test makes fail (exit 3).
var failedOnPurpose = "none"

func waitRunning(t *testing.T, ctx context.Context, c *slurmharness.Cluster, id string) {
	t.Helper()
	if err := c.WaitFor(ctx, "job "+id+" running", func() (bool, error) {
		out, err := c.Exec(ctx, loginHost, "squeue", "-h", "-j", id, "-o", "%T")
		return err == nil && strings.TrimSpace(out) == "RUNNING", nil
	}); err != nil {
		t.Fatal(err)
	}
}
