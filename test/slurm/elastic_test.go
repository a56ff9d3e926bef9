package slurm_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/autoscale"
	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// standIn plays the operator and Kubernetes for an elastic set: every second it asks slurmctld
// for the nodes, decides with the operator's own autoscale.Decide, sends the power requests
// the plan holds, and starts or stops worker hosts as the StatefulSet would make and remove
// pods (a stopping one runs the worker's preStop first, as the kubelet would). A node listed
// in unplaceable gets no host: its pod would be Pending, Kubernetes having no room for it.
type standIn struct {
	t   *testing.T
	c   *slurmharness.Cluster
	cl  *slurm.Client
	r   rendered
	set autoscale.Set

	mu          sync.Mutex
	running     int32 // hosts worker-0 … worker-(running-1) run
	unplaceable map[int32]bool
	preStops    []string // what each preStop printed, with how long it took
	errs        []string
	lastErr     string
	lastStates  string
}

func (s *standIn) loop(ctx context.Context) {
	for ctx.Err() == nil {
		s.step(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *standIn) step(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes, err := s.cl.Nodes(ctx)
	if err != nil {
		if e := err.Error(); e != s.lastErr {
			s.t.Logf("stand-in: asking slurmctld: %v", err) // slurmrestd starting: look again
			s.lastErr = e
		}
		return
	}
	byName := map[string]slurm.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	plan := autoscale.Decide(s.set, byName, s.running, time.Now())
	var states []string
	for _, n := range nodes {
		states = append(states, fmt.Sprintf("%s %v last busy %d", n.Name, n.State, n.LastBusy.Number))
	}
	if st := fmt.Sprintf("%s → pods %d, up %v, down %v", strings.Join(states, "; "), plan.Pods, plan.PowerUp, plan.PowerDown); st != s.lastStates {
		s.t.Logf("stand-in at %s: %s", time.Now().Format("15:04:05.0"), st)
		s.lastStates = st
	}
	for _, n := range plan.PowerUp {
		if err := s.cl.SetPower(ctx, n, true); err != nil {
			s.errs = append(s.errs, fmt.Sprintf("power up %s: %v", n, err))
			return
		}
	}
	for _, n := range plan.PowerDown {
		if err := s.cl.SetPower(ctx, n, false); err != nil {
			s.errs = append(s.errs, fmt.Sprintf("power down %s: %v", n, err))
		}
	}
	for s.running > plan.Pods {
		i := s.running - 1
		host, name := fmt.Sprintf("demo-worker-%d", i), s.set.NodeName(i)
		if !s.unplaceable[i] {
			start := time.Now()
			out, err := s.c.Exec(ctx, host, "env", "SLURM_NODE_NAME="+name, "/bin/sh", "-c", worker.PreStopScript)
			s.preStops = append(s.preStops, fmt.Sprintf("%s (%s, %v): %s", name, time.Since(start).Round(100*time.Millisecond), err, strings.TrimSpace(out)))
			s.t.Logf("stand-in: stopping %s; its logs:\n%s", host, s.c.Logs(host))
			if err := s.c.StopWorker(ctx, host); err != nil {
				s.errs = append(s.errs, fmt.Sprintf("stop %s: %v", host, err))
				return
			}
		}
		s.running--
	}
	for s.running < plan.Pods {
		i := s.running
		if !s.unplaceable[i] {
			h := podWorker(s.t, s.r, int(i))
			h.SlurmdScript = worker.ElasticSlurmdScript
			if err := s.c.AddWorker(ctx, h); err != nil {
				s.errs = append(s.errs, fmt.Sprintf("start worker-%d: %v", i, err))
				return
			}
		}
		s.running++
	}
}

func (s *standIn) pods() int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func (s *standIn) setUnplaceable(i int32, v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unplaceable[i] = v
}

// TestAnElasticSetFollowsSlurmsPowerSaving runs the rendered power-saving config on real Slurm
// with the operator's decision and a stand-in for the pods: a set of two nodes at minSize 0
// shows its capacity with no pod, refuses a job larger than maxSize at submit, runs a two-node
// job asking a GPU per node from zero on both nodes, removes them after the idle timeout, and requeues a job whose
// node's pod cannot start once Slurm's ResumeTimeout passes.
func TestAnElasticSetFollowsSlurmsPowerSaving(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	sc := spec(t, 0)
	sc.Spec.SlurmNodes.Worker.Autoscaling = &slurmv1alpha1.Autoscaling{Enabled: true, MinSize: 0, MaxSize: 2, IdleTimeoutSeconds: 10, ResumeTimeoutSeconds: 20}
	r := render(t, sc)
	conf := string(r.files["slurm-base.conf"])
	for _, want := range []string{"NodeName=worker-[0-1] ", " State=CLOUD", "ResumeProgram=/bin/true", "ResumeTimeout=20", "PartitionName=main Nodes=worker-[0-1] "} {
		if !strings.Contains(conf, want) {
			t.Fatalf("slurm.conf lacks %q:\n%s", want, conf)
		}
	}
	c := startCluster(t, ctx, r, 0)
	cl, err := slurmtest.StartRestd(ctx, c, ctlHost, r.in.Cluster, r.in.Keys.JWT)
	if err != nil {
		t.Fatal(err)
	}
	a := sc.Spec.SlurmNodes.Worker.Autoscaling
	s := &standIn{t: t, c: c, cl: cl, r: r, unplaceable: map[int32]bool{},
		set: autoscale.Set{Name: "worker", MinSize: a.MinSize, MaxSize: a.MaxSize, IdleTimeout: a.IdleTimeout()}}
	loopCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.loop(loopCtx); close(done) }()
	defer func() { stop(); <-done }()
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.errs {
			t.Errorf("stand-in: %s", e)
		}
	})

	// 1. The capacity shows with no pod: both nodes powered down.
	if got := sinfoStates(t, ctx, c); got != "worker-0 idle~\nworker-1 idle~" {
		t.Fatalf("sinfo before any job:\n%s", got)
	}
	if n := s.pods(); n != 0 {
		t.Fatalf("%d pods before any job", n)
	}
	// 2. A job larger than maxSize is refused at submit, not queued for ever.
	if out, err := c.Exec(ctx, loginHost, "sbatch", "-N3", "--wrap", "true"); err == nil || !strings.Contains(out+err.Error(), "Requested node configuration is not available") {
		t.Errorf("sbatch -N3 on a set of at most 2 nodes: %v\n%s", err, out)
	}
	// 3. A two-node job from zero gets both nodes: Slurm powers them up, both pods start.
	submitted := time.Now()
	job := sbatch(t, ctx, c, "-N2", "--gres=gpu:1", "--wrap", "srun sh -c 'echo $(hostname) $CUDA_VISIBLE_DEVICES'")
	t.Logf("job %s submitted at %s", job, submitted.Format("15:04:05.0"))
	waitRunning(t, ctx, c, job)
	t.Logf("a two-node job from zero pods: running %s after sbatch", time.Since(submitted).Round(100*time.Millisecond))
	waitJob(t, ctx, c, job, "COMPLETED")
	if out := login(t, ctx, c, "sacct", "-n", "-X", "-P", "-j", job, "-o", "NodeList"); strings.TrimSpace(out) != "worker-[0-1]" {
		t.Errorf("job %s ran on %q, want worker-[0-1]", job, out)
	}
	if out, err := c.Exec(ctx, loginHost, "sh", "-c", "sort /shared/slurm-"+job+".out"); err != nil || strings.TrimSpace(out) != "demo-worker-0 0\ndemo-worker-1 0" {
		t.Errorf("the job's output (each node's host and GPU): %v\n%s", err, out)
	}
	// 4. After the idle timeout both are powered down and their pods removed; each preStop
	// ends at once (a drain would outlast the power-down).
	if err := c.WaitFor(ctx, "both nodes powered down and their pods gone", func() (bool, error) {
		return s.pods() == 0 && sinfoStates(t, ctx, c) == "worker-0 idle~\nworker-1 idle~", nil
	}); err != nil {
		t.Fatalf("%v: %d pods, sinfo:\n%s", err, s.pods(), sinfoStates(t, ctx, c))
	}
	s.mu.Lock()
	stops := append([]string(nil), s.preStops...)
	s.mu.Unlock()
	if len(stops) != 2 {
		t.Errorf("preStops run: %q, want two", stops)
	}
	for _, p := range stops {
		if !strings.Contains(p, "powered node") || !strings.Contains(p, "<nil>") {
			t.Errorf("a preStop of a powered-down node: %s", p)
		}
	}
	for _, n := range []string{"worker-0", "worker-1"} {
		if out := login(t, ctx, c, "scontrol", "show", "node", n); strings.Contains(out, "DRAIN") {
			t.Errorf("%s is drained after its power-down:\n%s", n, out)
		}
	}
	// 5. A node whose pod cannot start: at ResumeTimeout Slurm sets it DOWN with its reason and
	// requeues the job, which runs once the node is back.
	s.setUnplaceable(1, true)
	job = sbatch(t, ctx, c, "-N2", "--wrap", "srun hostname")
	if err := c.WaitFor(ctx, "worker-1 down at ResumeTimeout and job "+job+" requeued", func() (bool, error) {
		n, err := cl.Node(ctx, "worker-1")
		if err != nil || !n.Has("DOWN") {
			return false, nil
		}
		out, err := c.Exec(ctx, loginHost, "scontrol", "show", "job", job)
		return err == nil && strings.Contains(out, "JobState=PENDING") && !strings.Contains(out, "Restarts=0"), nil
	}); err != nil {
		out, _ := c.Exec(ctx, loginHost, "scontrol", "show", "job", job)
		t.Fatalf("%v:\n%s\n%s", err, out, sinfoStates(t, ctx, c))
	}
	n, _ := cl.Node(ctx, "worker-1")
	t.Logf("worker-1 after its resume timed out: %v, reason %q", n.State, n.Reason)
	if !strings.Contains(strings.ToLower(n.Reason), "resumetimeout") {
		t.Errorf("worker-1's reason %q does not say the resume timed out", n.Reason)
	}
	// Kubernetes finds room; the admin resumes the node (docs/scaling.md): the job runs.
	s.setUnplaceable(1, false)
	login(t, ctx, c, "scontrol", "update", "nodename=worker-1", "state=resume")
	// Slurm makes a requeued job wait two minutes (its BeginTime); the admin lets it go now.
	login(t, ctx, c, "scontrol", "update", "jobid="+job, "starttime=now")
	defer func() {
		if t.Failed() {
			lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, _ := c.Exec(lctx, loginHost, "scontrol", "show", "job", job)
			t.Logf("job %s:\n%s\n%s", job, out, sinfoStates(t, lctx, c))
		}
	}()
	waitJob(t, ctx, c, job, "COMPLETED")
}

// sinfoStates is sinfo's node list, "name state" per line, sorted.
func sinfoStates(t *testing.T, ctx context.Context, c *slurmharness.Cluster) string {
	t.Helper()
	out, err := c.Exec(ctx, loginHost, "sh", "-c", "sinfo -N -h -o '%N %t' | sort -u")
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(out)
}
