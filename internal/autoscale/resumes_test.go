package autoscale

import (
	"reflect"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

func TestResumesFollowEachPowerUpToItsEnd(t *testing.T) {
	set := Set{Name: "gpu", MaxSize: 3}
	off := []string{"IDLE", "CLOUD", "POWERED_DOWN"}
	up := []string{"ALLOCATED", "CLOUD"}
	resuming := []string{"ALLOCATED", "CLOUD", "POWERING_UP"}
	failed := []string{"DOWN", "CLOUD", "POWERED_DOWN", "NOT_RESPONDING"}
	var r Resumes
	look := func(at time.Duration, ns ...slurm.Node) []Ended { return r.Observe(set, nodes(ns...), t0.Add(at)) }

	if got := look(0, node("gpu-0", 0, off...), node("gpu-1", 0, off...), node("gpu-2", 0, off...)); got != nil || r.Watching() {
		t.Fatalf("nothing powering up: got %v, watching %v", got, r.Watching())
	}
	// A two-node job: both power up; gpu-2 stays off.
	if got := look(5*time.Second, node("gpu-0", 0, resuming...), node("gpu-1", 0, resuming...), node("gpu-2", 0, off...)); got != nil || !r.Watching() {
		t.Fatalf("power-ups started: got %v, watching %v", got, r.Watching())
	}
	// Still powering up at the next look: the first look's time is kept.
	if got := look(10*time.Second, node("gpu-0", 0, up...), node("gpu-1", 0, resuming...), node("gpu-2", 0, off...)); !reflect.DeepEqual(got, []Ended{{Node: "gpu-0", Since: t0.Add(5 * time.Second), After: t0}}) {
		t.Fatalf("gpu-0 came up: got %v", got)
	}
	if got := look(15*time.Second, node("gpu-0", 0, up...), node("gpu-1", 0, failed...), node("gpu-2", 0, off...)); !reflect.DeepEqual(got, []Ended{{Node: "gpu-1", Since: t0.Add(5 * time.Second), After: t0, Failed: true}}) {
		t.Fatalf("gpu-1's resume timed out: got %v", got)
	}
	if r.Watching() {
		t.Fatal("both power-ups ended, still watching")
	}
	// A node asked down again before it came up, and one that leaves the answer, end neither way.
	look(20*time.Second, node("gpu-0", 0, up...), node("gpu-1", 0, resuming...), node("gpu-2", 0, resuming...))
	if got := look(25*time.Second, node("gpu-0", 0, up...), node("gpu-1", 0, "IDLE", "CLOUD", "POWERING_DOWN")); got != nil || r.Watching() {
		t.Fatalf("gpu-1 powered down again and gpu-2 gone: got %v, watching %v", got, r.Watching())
	}
	// A maxSize that shrinks forgets the nodes above it.
	look(30*time.Second, node("gpu-2", 0, resuming...))
	if got := r.Observe(Set{Name: "gpu", MaxSize: 2}, nodes(node("gpu-2", 0, up...)), t0.Add(35*time.Second)); got != nil || r.Watching() {
		t.Fatalf("gpu-2 above maxSize: got %v, watching %v", got, r.Watching())
	}
}

func TestWaitsAreTakenOncePerJobWhenAllItsNodesAreReady(t *testing.T) {
	job := func(id int64, submitted, started time.Duration, state []string, on ...string) slurm.Job {
		j := slurm.Job{ID: id, State: state,
			SubmitTime: slurm.Number{Set: true, Number: t0.Add(submitted).Unix()},
			StartTime:  slurm.Number{Set: true, Number: t0.Add(started).Unix()}}
		j.OnNodes(on...)
		return j
	}
	set := Set{Name: "gpu", MaxSize: 3}
	off := []string{"IDLE", "CLOUD", "POWERED_DOWN"}
	up := []string{"ALLOCATED", "CLOUD"}
	resuming := []string{"ALLOCATED", "CLOUD", "POWERING_UP"}
	var r Resumes
	r.Observe(set, nodes(node("gpu-0", 0, off...), node("gpu-1", 0, off...), node("gpu-2", 0, off...)), t0)
	r.Observe(set, nodes(node("gpu-0", 0, resuming...), node("gpu-1", 0, resuming...), node("gpu-2", 0, off...)), t0.Add(5*time.Second))
	// gpu-0 is up, gpu-1 still powering up: the two-node job is still CONFIGURING.
	r.Observe(set, nodes(node("gpu-0", 0, up...), node("gpu-1", 0, resuming...), node("gpu-2", 0, off...)), t0.Add(10*time.Second))
	if !r.AwaitingJobs() {
		t.Fatal("gpu-0 came up: its jobs' waits are awaited")
	}
	old := job(1, -10*time.Minute, -9*time.Minute, []string{"COMPLETED"}, "gpu-0") // before this power-up
	queued := job(3, 2*time.Second, 0, []string{"PENDING"})
	configuring := []slurm.Job{old, job(2, 0, 3*time.Second, []string{"RUNNING", "CONFIGURING"}, "gpu-0", "gpu-1"), queued}
	if got := r.Waits(configuring); got != nil || !r.AwaitingJobs() {
		t.Fatalf("the job is configuring: got %v, awaiting %v", got, r.AwaitingJobs())
	}
	// gpu-1 up: Slurm ends the configuring and sets the start time to that moment (15 s). The
	// short job has even completed by this look; the wait is taken once though both nodes hold it.
	r.Observe(set, nodes(node("gpu-0", 0, up...), node("gpu-1", 0, up...), node("gpu-2", 0, off...)), t0.Add(20*time.Second))
	ran := []slurm.Job{old, job(2, 0, 15*time.Second, []string{"COMPLETED"}, "gpu-0", "gpu-1"), queued}
	if got := r.Waits(ran); !reflect.DeepEqual(got, []time.Duration{15 * time.Second}) {
		t.Fatalf("the two-node job's wait: got %v, want [15s]", got)
	}
	if r.AwaitingJobs() {
		t.Fatal("both nodes' jobs taken, still awaiting")
	}
	// A powered-down node Slurm gave a job registers before Slurm's power-save pass marked it
	// POWERING_UP (a pod that starts within that pass's interval): the power-up is still seen,
	// from the allocation, and the job's wait taken.
	r.Observe(set, nodes(node("gpu-0", 0, up...), node("gpu-1", 0, up...), node("gpu-2", 0, "ALLOCATED", "CLOUD", "POWERED_DOWN")), t0.Add(40*time.Second))
	r.Observe(set, nodes(node("gpu-0", 0, up...), node("gpu-1", 0, up...), node("gpu-2", 0, up...)), t0.Add(45*time.Second))
	quick := []slurm.Job{old, job(4, 38*time.Second, 44*time.Second, []string{"COMPLETED"}, "gpu-2")}
	if got := r.Waits(quick); !reflect.DeepEqual(got, []time.Duration{6 * time.Second}) {
		t.Fatalf("a job whose node registered before it was marked POWERING_UP: got %v, want [6s]", got)
	}
	// A node the operator powered up itself (no job given it) gives no wait and is not kept.
	r.Observe(set, nodes(node("gpu-0", 0, up...), node("gpu-1", 0, up...), node("gpu-2", 0, resuming...)), t0.Add(25*time.Second))
	r.Observe(set, nodes(node("gpu-0", 0, up...), node("gpu-1", 0, up...), node("gpu-2", 0, "IDLE", "CLOUD")), t0.Add(30*time.Second))
	if got := r.Waits(ran); got != nil || r.AwaitingJobs() {
		t.Fatalf("gpu-2 came up for no job: got %v, awaiting %v", got, r.AwaitingJobs())
	}
}
