package autoscale

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func node(name string, idleFor time.Duration, state ...string) slurm.Node {
	return slurm.Node{Name: name, State: state, LastBusy: slurm.Number{Set: true, Number: t0.Add(-idleFor).Unix()}}
}

func nodes(ns ...slurm.Node) map[string]slurm.Node {
	m := map[string]slurm.Node{}
	for _, n := range ns {
		m[n.Name] = n
	}
	return m
}

func TestDecide(t *testing.T) {
	set := Set{Name: "worker", MinSize: 0, MaxSize: 4, IdleTimeout: time.Minute}
	off := []string{"IDLE", "CLOUD", "POWERED_DOWN"}
	cases := []struct {
		name      string
		set       Set
		nodes     map[string]slurm.Node
		pods      int32
		wantPods  int32
		powerUp   []string
		powerDown []string
	}{
		{name: "all powered down: no pod", set: set,
			nodes: nodes(node("worker-0", 0, off...), node("worker-1", 0, off...), node("worker-2", 0, off...), node("worker-3", 0, off...))},
		{name: "minSize nodes get pods and are asked up", set: Set{Name: "worker", MinSize: 2, MaxSize: 4, IdleTimeout: time.Minute},
			nodes:    nodes(node("worker-0", 0, off...), node("worker-1", 0, off...), node("worker-2", 0, off...), node("worker-3", 0, off...)),
			wantPods: 2, powerUp: []string{"worker-0", "worker-1"}},
		{name: "Slurm powers up two nodes for a job: both get pods", set: set,
			nodes: nodes(node("worker-0", 0, "IDLE", "CLOUD", "POWERING_UP", "NOT_RESPONDING"), node("worker-1", 0, "IDLE", "CLOUD", "POWERING_UP", "NOT_RESPONDING"),
				node("worker-2", 0, off...), node("worker-3", 0, off...)),
			wantPods: 2},
		{name: "nodes Slurm allocated while powered down get pods, and are left to Slurm to power up", set: set,
			nodes: nodes(node("worker-0", 0, "MIXED", "CLOUD", "POWERED_DOWN"), node("worker-1", 0, "MIXED", "CLOUD", "POWERED_DOWN"),
				node("worker-2", 0, off...), node("worker-3", 0, off...)),
			wantPods: 2},
		{name: "a node Slurm chose above a powered-down one: the hole is asked up too", set: set, pods: 1,
			nodes:    nodes(node("worker-0", 0, "ALLOCATED", "CLOUD"), node("worker-1", 0, off...), node("worker-2", 0, "IDLE", "CLOUD", "POWERING_UP"), node("worker-3", 0, off...)),
			wantPods: 3, powerUp: []string{"worker-1"}},
		{name: "idle past the timeout at the top: powered down, highest first", set: set, pods: 3,
			nodes:    nodes(node("worker-0", 5*time.Minute, "IDLE", "CLOUD"), node("worker-1", 2*time.Minute, "IDLE", "CLOUD"), node("worker-2", 2*time.Minute, "IDLE", "CLOUD"), node("worker-3", 0, off...)),
			wantPods: 3, powerDown: []string{"worker-2", "worker-1", "worker-0"}},
		{name: "a busy node keeps the idle ones below it", set: set, pods: 3,
			nodes:    nodes(node("worker-0", 5*time.Minute, "IDLE", "CLOUD"), node("worker-1", 0, "ALLOCATED", "CLOUD"), node("worker-2", 5*time.Minute, "IDLE", "CLOUD"), node("worker-3", 0, off...)),
			wantPods: 3, powerDown: []string{"worker-2"}},
		{name: "a node idle for less than the timeout stays", set: set, pods: 2,
			nodes:    nodes(node("worker-0", 5*time.Minute, "IDLE", "CLOUD"), node("worker-1", 30*time.Second, "IDLE", "CLOUD"), node("worker-2", 0, off...), node("worker-3", 0, off...)),
			wantPods: 2},
		{name: "powering down with nothing on it: its pod goes", set: set, pods: 2,
			nodes:    nodes(node("worker-0", 5*time.Minute, "IDLE", "CLOUD"), node("worker-1", 0, "IDLE", "CLOUD", "POWERING_DOWN"), node("worker-2", 0, off...), node("worker-3", 0, off...)),
			wantPods: 1, powerDown: []string{"worker-0"}},
		{name: "an admin's drain is never powered down, nor the nodes below it", set: set, pods: 2,
			nodes:    nodes(node("worker-0", 5*time.Minute, "IDLE", "CLOUD"), node("worker-1", 5*time.Minute, "IDLE", "DRAIN", "CLOUD"), node("worker-2", 0, off...), node("worker-3", 0, off...)),
			wantPods: 2},
		{name: "minSize nodes are never powered down", set: Set{Name: "worker", MinSize: 1, MaxSize: 4, IdleTimeout: time.Minute}, pods: 2,
			nodes:    nodes(node("worker-0", 5*time.Minute, "IDLE", "CLOUD"), node("worker-1", 5*time.Minute, "IDLE", "CLOUD"), node("worker-2", 0, off...), node("worker-3", 0, off...)),
			wantPods: 2, powerDown: []string{"worker-1"}},
		{name: "a node missing from Slurm's answer keeps its pod", set: set, pods: 3,
			nodes:    nodes(node("worker-0", 0, off...), node("worker-1", 0, off...), node("worker-3", 0, off...)),
			wantPods: 3, powerUp: []string{"worker-0", "worker-1"}},
		{name: "a resume that timed out (DOWN, powered down) gets no pod", set: set, pods: 2,
			nodes:    nodes(node("worker-0", 0, "IDLE", "CLOUD", "POWERING_UP"), node("worker-1", 0, "DOWN", "CLOUD", "POWERED_DOWN"), node("worker-2", 0, off...), node("worker-3", 0, off...)),
			wantPods: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Decide(c.set, c.nodes, c.pods, t0)
			if n := p.Up + p.PoweringUp + p.Down + p.Failed; n != len(c.nodes) {
				t.Errorf("the counts %+v cover %d nodes of %d", p, n, len(c.nodes))
			}
			if p.Pods != c.wantPods || !slices.Equal(p.PowerUp, c.powerUp) || !slices.Equal(p.PowerDown, c.powerDown) {
				t.Errorf("Decide = pods %d, up %v, down %v; want pods %d, up %v, down %v", p.Pods, p.PowerUp, p.PowerDown, c.wantPods, c.powerUp, c.powerDown)
			}
		})
	}
}

func TestDecideCountsAFailedResumeApart(t *testing.T) {
	set := Set{Name: "worker", MaxSize: 3, IdleTimeout: time.Minute}
	p := Decide(set, nodes(node("worker-0", 0, "IDLE", "CLOUD"), node("worker-1", 0, "DOWN", "CLOUD", "POWERED_DOWN"),
		node("worker-2", 0, "IDLE", "CLOUD", "POWERED_DOWN")), 1, t0)
	if p.Up != 1 || p.Failed != 1 || p.Down != 1 || p.PoweringUp != 0 {
		t.Errorf("counts %+v; want one up, one failed, one powered down", p)
	}
	// A powered-down node Slurm gave a job counts as powering up before its POWERING_UP flag.
	p = Decide(set, nodes(node("worker-0", 0, "IDLE", "CLOUD"), node("worker-1", 0, "ALLOCATED", "CLOUD", "POWERED_DOWN"),
		node("worker-2", 0, "IDLE", "CLOUD", "POWERING_UP")), 1, t0)
	if p.Up != 1 || p.PoweringUp != 2 || p.Down != 0 || p.Failed != 0 {
		t.Errorf("counts %+v; want one up, two powering up", p)
	}
}

// commented is a node (no last busy time) with a comment.
func commented(name, comment string, state ...string) slurm.Node {
	n := node(name, 0, state...)
	n.Comment = comment
	return n
}

func TestCannotStartCommentsPoweringUpNodesWhosePodsCannotStartAndClearsItsOwnCommentsOnly(t *testing.T) {
	set := Set{Name: "gpu", MaxSize: 7}
	why := "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
	ours := slurmfacts.CommentPodCannotStart + ": " + why
	got := CannotStart(set, nodes(
		node("gpu-0", 0, "ALLOCATED", "CLOUD", "POWERING_UP"),                       // pod Pending: commented
		commented("gpu-1", ours, "ALLOCATED", "CLOUD", "POWERING_UP"),               // already says so
		commented("gpu-2", "admin: new fan", "IDLE", "CLOUD", "POWERING_UP"),        // an admin's comment stays
		commented("gpu-3", ours, "ALLOCATED", "CLOUD"),                              // its pod started: cleared
		commented("gpu-4", ours, "DOWN", "CLOUD", "POWERED_DOWN", "NOT_RESPONDING"), // resume timed out: kept
		node("gpu-5", 0, "IDLE", "CLOUD", "POWERED_DOWN"),                           // powered down, pod Pending: left
		commented("gpu-6", ours, "IDLE", "CLOUD", "POWERED_DOWN"),                   // resumed by an admin, pod gone: cleared
	), map[string]string{"gpu-0": why, "gpu-1": why, "gpu-2": why, "gpu-4": why, "gpu-5": why})
	if want := map[string]string{"gpu-0": ours, "gpu-3": "", "gpu-6": ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("comments: got %q, want %q", got, want)
	}
	// Words over several lines (a kubelet's pull error) become one line.
	got = CannotStart(set, nodes(node("gpu-0", 0, "ALLOCATED", "CLOUD", "POWERING_UP")), map[string]string{"gpu-0": "ErrImagePull: failed to pull:\n\tnot found\r\n"})
	if want := slurmfacts.CommentPodCannotStart + ": ErrImagePull: failed to pull: not found"; got["gpu-0"] != want {
		t.Errorf("words over several lines: got %q, want %q", got["gpu-0"], want)
	}
	// The scheduler's words change: the comment says the new ones; very long words are cut.
	long := "Unschedulable: " + strings.Repeat("0/300 nodes are available: ", 20)
	got = CannotStart(set, nodes(commented("gpu-1", ours, "ALLOCATED", "CLOUD", "POWERING_UP")), map[string]string{"gpu-1": long})
	if c := got["gpu-1"]; len(c) != maxComment || !strings.HasPrefix(c, slurmfacts.CommentPodCannotStart+": Unschedulable: 0/300") {
		t.Errorf("a new, long reason: got %q (%d bytes)", c, len(c))
	}
}

func TestTheJobsWaitingForNodesWhosePodsCannotStartSaySoInTheirAdminComment(t *testing.T) {
	set := Set{Name: "gpu", MaxSize: 4}
	why := "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
	ours := slurmfacts.CommentPodCannotStart + ": " + why
	ns := nodes(
		node("gpu-0", 0, "ALLOCATED", "CLOUD", "POWERING_UP"), // commented by CannotStart this look
		commented("gpu-1", ours, "ALLOCATED", "CLOUD", "POWERING_UP"),
		commented("gpu-2", ours, "DOWN", "CLOUD", "POWERED_DOWN"), // down: its job was requeued
		commented("gpu-3", ours, "ALLOCATED", "CLOUD"),            // its pod started: cleared this look
	)
	waiting := WaitingNodes(set, ns, map[string]string{"gpu-0": ours, "gpu-3": ""})
	if want := map[string]string{"gpu-0": why, "gpu-1": why}; !reflect.DeepEqual(waiting, want) {
		t.Fatalf("waiting nodes: got %q, want %q", waiting, want)
	}
	job := func(id int64, admin string, state string, on ...string) slurm.Job {
		j := slurm.Job{ID: id, AdminComment: admin, State: []string{state}}
		j.OnNodes(on...)
		return j
	}
	said := slurmfacts.JobCommentWaitsForPod + "gpu-1: " + why
	got := JobComments(set, waiting, []slurm.Job{
		job(1, "", "CONFIGURING", "gpu-3", "gpu-0"),          // the first waiting node it has
		job(2, said, "CONFIGURING", "gpu-1"),                 // already says so
		job(3, "billing: project x", "CONFIGURING", "gpu-1"), // an admin's comment stays
		job(4, "", "RUNNING", "gpu-1"),                       // not waiting
		job(5, "", "CONFIGURING", "gpu-3"),                   // its node's pod started
		{ID: 6, State: []string{"PENDING"}},                  // no nodes yet
		job(7, slurmfacts.JobCommentWaitsForPod+"gpu-1: Unschedulable: old words", "CONFIGURING", "gpu-1"),
		// also on another set's node, which commented it first: that set's to keep
		job(8, slurmfacts.JobCommentWaitsForPod+"cpu-0: Unschedulable: no cpu", "CONFIGURING", "cpu-0", "gpu-1"),
		// a node name that only starts like the set's
		job(9, slurmfacts.JobCommentWaitsForPod+"gpu-10: words", "CONFIGURING", "gpu-10", "gpu-1"),
	})
	want := map[int64]string{1: slurmfacts.JobCommentWaitsForPod + "gpu-0: " + why, 7: said}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("job comments: got %v, want %v", got, want)
	}
}
