package activecheck

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/golden"
)

func TestRingMeasuresEachWorkerAgainstTwoOthers(t *testing.T) {
	if got := fmt.Sprint(ring([]string{"a", "b"})); got != "[[a b]]" {
		t.Errorf("two workers: %s", got)
	}
	if got := fmt.Sprint(ring([]string{"a", "b", "c"})); got != "[[a b] [b c] [c a]]" {
		t.Errorf("three workers: %s", got)
	}
	if ring([]string{"a"}) != nil {
		t.Error("one worker makes no pair")
	}
}

// The slow worker slows every pair it is in; its neighbours each have one fast pair.
func TestJudgeFailsTheWorkerWhoseBestPairIsBelowTheFloor(t *testing.T) {
	c := Check{Name: "mpi", Program: slurmv1alpha1.ActiveCheckMPIAllReduce, FloorPercent: 50}
	r := &round{nodes: []string{"w0", "w1", "w2", "w3"}, bandwidth: map[[2]string]float64{
		{"w0", "w1"}: 1000, {"w1", "w2"}: 12, {"w3", "w0"}: 950,
	}, failed: map[[2]string]string{{"w2", "w3"}: "srun: error: task 1 exited"}}
	got := map[string]Result{}
	for _, res := range r.judge(c, time.Unix(0, 0)) {
		got[res.Node] = res
	}
	for _, w := range []string{"w0", "w1", "w3"} {
		if !got[w].Passed {
			t.Errorf("%s failed: %q", w, got[w].Output)
		}
	}
	if got["w2"].Passed || got["w2"].Output != "best all-reduce 12 MB/s (with w1), below 50% of the median worker's 975 MB/s" {
		t.Errorf("w2: %+v", got["w2"])
	}
	// A worker none of whose pairs ran gets no result; one whose every pair failed fails.
	r = &round{nodes: []string{"a", "b", "c"}, bandwidth: map[[2]string]float64{}, failed: map[[2]string]string{{"a", "b"}: "MPI_Init failed"}}
	res := r.judge(c, time.Unix(0, 0))
	if len(res) != 2 || res[0].Passed || res[1].Passed || !strings.Contains(res[0].Output, "MPI_Init failed") {
		t.Errorf("failed pairs: %+v", res)
	}
}

func TestOutcomeKeepsTheEndOfTheOutputAndSaysHowTheJobEnded(t *testing.T) {
	job := func(rc int64, comment string, state ...string) slurm.Job {
		j := slurm.Job{State: state, Comment: comment}
		j.Exit.ReturnCode.Number = rc
		return j
	}
	for _, tc := range []struct {
		j      slurm.Job
		passed bool
		out    string
	}{
		{job(0, "fine", "COMPLETED"), true, "fine"},
		{job(3, "disk full", "FAILED"), false, "disk full"},
		{job(0, "", "TIMEOUT"), false, "did not end within its timeout"},
		{job(0, "writing", "TIMEOUT"), false, "did not end within its timeout: writing"},
		{job(9, "", "NODE_FAIL"), false, "NODE_FAIL, exit 9"},
	} {
		passed, out := outcome(tc.j)
		if passed != tc.passed || out != tc.out {
			t.Errorf("%v %q: got %v %q, want %v %q", tc.j.State, tc.j.Comment, passed, out, tc.passed, tc.out)
		}
	}
}

func TestCheckOfReasonNamesTheCheckOfItsDrainsOnly(t *testing.T) {
	c := Check{Name: "jail"}
	reason := c.Reason("the jail has 10 MiB free")
	if name, ok := CheckOfReason(reason); !ok || name != "jail" || !c.DrainedBy(reason) {
		t.Errorf("%q: %q %v", reason, name, ok)
	}
	for _, r := range []string{"slurm-operator: health: 1 of 2 GPUs", "admin: check jail: x", "slurm-operator: kubernetes node a is cordoned"} {
		if _, ok := CheckOfReason(r); ok || c.DrainedBy(r) {
			t.Errorf("%q read as a check's drain", r)
		}
	}
}

// fakeAPI is slurmrestd for the decisions of Step: it records what is asked.
type fakeAPI struct {
	jobs      []slurm.Job
	submitted [][]string
	drained   map[string]string
	resumed   []string
	listed    int // calls of Jobs
	cancelled []int64
	// pods are the KubernetesJob checks' Jobs by holder, and how they ended.
	pods map[int64]*PodOutcome
}

func (f *fakeAPI) Job(_ context.Context, id int64) (slurm.Job, bool, error) {
	for _, j := range f.jobs {
		if j.ID == id {
			return j, true, nil
		}
	}
	return slurm.Job{}, false, nil
}
func (f *fakeAPI) Jobs(context.Context) ([]slurm.Job, error) {
	f.listed++
	return append([]slurm.Job(nil), f.jobs...), nil
}
func (f *fakeAPI) Submit(_ context.Context, j slurm.BatchJob) (int64, error) {
	f.submitted = append(f.submitted, j.Nodes)
	id := int64(100 + len(f.submitted))
	f.jobs = append(f.jobs, slurm.Job{ID: id, Name: j.Name, State: []string{"PENDING"}})
	return id, nil
}

// end ends a queued job as Slurm would: its state, exit status and comment.
func (f *fakeAPI) end(id int64, state string, rc int64, comment string) {
	for i := range f.jobs {
		if f.jobs[i].ID == id {
			f.jobs[i].State, f.jobs[i].Comment = []string{state}, comment
			f.jobs[i].Exit.ReturnCode.Number = rc
		}
	}
}
func (f *fakeAPI) Drain(_ context.Context, name, reason string) error {
	f.drained[name] = reason
	return nil
}
func (f *fakeAPI) ResumeIfOwned(_ context.Context, name string) (bool, error) {
	f.resumed = append(f.resumed, name)
	return true, nil
}
func (f *fakeAPI) SetNodeComment(context.Context, string, string) error { return nil }
func (f *fakeAPI) CancelJob(_ context.Context, id int64) error {
	f.cancelled = append(f.cancelled, id)
	return nil
}
func (f *fakeAPI) PodCheck(_ context.Context, _ Check, _ string, holder int64, start bool) (PodOutcome, error) {
	if f.pods == nil {
		f.pods = map[int64]*PodOutcome{}
	}
	p, ok := f.pods[holder]
	if !ok {
		if start {
			f.pods[holder] = &PodOutcome{}
		}
		return PodOutcome{}, nil
	}
	return *p, nil
}

func node(name, reason string, state ...string) slurm.Node {
	return slurm.Node{Name: name, State: state, Reason: reason, Partitions: []string{"main"}}
}

// Only idle workers in service (or drained by the check itself) get a run; an admin's drain,
// a busy worker and a worker with a check job already queued get none; a worker drained by the
// check is resumed after its run is queued, so the run takes it first.
func TestStepSubmitsOnIdleWorkersOnlyAndRechecksItsOwnDrains(t *testing.T) {
	c := Check{Name: "x", Script: "true", Interval: time.Hour, Timeout: time.Minute, OnFailure: slurmv1alpha1.ActiveCheckDrain, AfterDrain: true}
	api := &fakeAPI{drained: map[string]string{}}
	workers := []slurm.Node{
		node("w0", "", "IDLE"),
		node("w1", "", "MIXED"),
		node("w2", "fan broken", "IDLE", "DRAIN"),
		node("w3", c.Reason("bad"), "IDLE", "DRAIN"),
		node("w4", "", "IDLE"),
	}
	s := NewState()
	s.inflight[7] = queued{check: "x", nodes: []string{"w4"}} // queued at an earlier look
	api.jobs = []slurm.Job{{ID: 7, Name: c.JobName(), State: []string{"PENDING"}}}
	if _, err := s.Step(context.Background(), api, []Check{c}, workers, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(api.submitted); got != "[[w0] [w3]]" {
		t.Errorf("submitted on %s, want w0 and w3", got)
	}
	if fmt.Sprint(api.resumed) != "[w3]" {
		t.Errorf("resumed %v, want w3", api.resumed)
	}
	// Queued: nothing is submitted again.
	api.submitted = nil
	if _, err := s.Step(context.Background(), api, []Check{c}, workers, time.Now()); err != nil {
		t.Fatal(err)
	}
	if len(api.submitted) != 0 {
		t.Errorf("submitted again while queued: %v", api.submitted)
	}
	// w0 passes; w3 (resumed for its run, idle now) fails again and is drained with the output.
	api.end(101, "COMPLETED", 0, "fine")
	api.end(102, "FAILED", 1, "still bad")
	workers[3] = node("w3", "", "IDLE")
	results, err := s.Step(context.Background(), api, []Check{c}, workers, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || len(api.submitted) != 0 {
		t.Errorf("results %+v, submitted %v: want two results and nothing due", results, api.submitted)
	}
	if fmt.Sprint(api.drained) != "map[w3:slurm-operator: check x: still bad]" {
		t.Errorf("drained %v", api.drained)
	}
}

// A check run as a Kubernetes Job: its holder job is queued as any check job; once the holder
// runs, the pod is started; its failure drains the worker with the pod's output and ends the
// holder; a holder that runs out its time with no word from the pod fails the worker.
func TestAKubernetesJobCheckRunsItsPodWhileItsHolderHoldsTheWorker(t *testing.T) {
	c := Check{Name: "k", Script: "true", Interval: time.Hour, Timeout: time.Minute, OnFailure: slurmv1alpha1.ActiveCheckDrain, InPod: true, Image: "dcgm"}
	if !strings.Contains(c.BatchScript(), "exec sleep 120") || strings.Contains(c.BatchScript(), "check()") {
		t.Errorf("the holder's script:\n%s", c.BatchScript())
	}
	if !strings.Contains(c.PodScript(), ">/dev/termination-log") {
		t.Errorf("the pod's script:\n%s", c.PodScript())
	}
	api := &fakeAPI{drained: map[string]string{}}
	s := NewState()
	workers := []slurm.Node{node("w0", "", "IDLE"), node("w1", "", "IDLE")}
	step := func() []Result {
		t.Helper()
		got, err := s.Step(context.Background(), api, []Check{c}, workers, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	step()
	if fmt.Sprint(api.submitted) != "[[w0] [w1]]" || len(api.pods) != 0 {
		t.Fatalf("submitted %v, pods %v: want two holders and no pod before they run", api.submitted, api.pods)
	}
	for i := range api.jobs {
		api.jobs[i].State = []string{"RUNNING"}
	}
	step()
	if len(api.pods) != 2 {
		t.Fatalf("pods %v: want one per running holder", api.pods)
	}
	*api.pods[101] = PodOutcome{Ended: true, Passed: true, Output: "fine"}
	*api.pods[102] = PodOutcome{Ended: true, Output: "xid 79 on GPU 3"}
	results := step()
	if len(results) != 2 || fmt.Sprint(api.cancelled) != "[101 102]" && fmt.Sprint(api.cancelled) != "[102 101]" {
		t.Errorf("results %+v, cancelled %v: want both taken and both holders ended", results, api.cancelled)
	}
	if fmt.Sprint(api.drained) != "map[w1:slurm-operator: check k: xid 79 on GPU 3]" {
		t.Errorf("drained %v", api.drained)
	}

	// A holder that ran out its time, the pod silent: a failure.
	s, api = NewState(), &fakeAPI{drained: map[string]string{}}
	workers = workers[:1]
	step()
	api.jobs[0].State = []string{"RUNNING"}
	step()
	api.end(101, "TIMEOUT", 0, "")
	api.jobs[0].Nodes = "w0"
	if results := step(); len(results) != 1 || results[0].Passed || results[0].Output != "did not end within its timeout" {
		t.Errorf("a silent pod whose holder timed out: %+v", results)
	}
}

// The batch script puts the end of the check's output in the job's comment and exits with the
// check's status ('make golden' rewrites testdata/jail-writable.golden).
func TestBatchScriptGolden(t *testing.T) {
	c := Check{Name: "jail", Program: slurmv1alpha1.ActiveCheckJailWritable, Interval: time.Hour, MinFreeKB: 1 << 20, DCGMLevel: 1}
	golden.Check(t, filepath.Join("testdata", "jail-writable.golden"), []byte(c.BatchScript()))
}

// A worker's failures keep the time of the first of them until a run passes.
func TestFailingSinceIsTheFirstOfAnUnbrokenRunOfFailures(t *testing.T) {
	s := NewState()
	t0 := time.Unix(1000, 0)
	s.record(Result{Check: "x", Node: "w", At: t0, Output: "bad"})
	s.forget("x", "w") // back from someone else's drain: due again, the failures go on
	s.record(Result{Check: "x", Node: "w", At: t0.Add(time.Hour), Output: "still bad"})
	if got := s.last["x"]["w"].FailingSince; !got.Equal(t0) {
		t.Errorf("failing since %v, want %v", got, t0)
	}
	s.record(Result{Check: "x", Node: "w", At: t0.Add(2 * time.Hour), Passed: true, Output: "fine"})
	s.record(Result{Check: "x", Node: "w", At: t0.Add(3 * time.Hour), Output: "bad again"})
	if got := s.last["x"]["w"].FailingSince; !got.Equal(t0.Add(3 * time.Hour)) {
		t.Errorf("after a pass, failing since %v, want the new failure's time", got)
	}
}

// onNodes is a job of the check running on the named nodes, submitted at submit.
func onNodes(id int64, c Check, submit int64, nodes ...string) slurm.Job {
	j := slurm.Job{ID: id, Name: c.JobName(), State: []string{"RUNNING"}, RequiredNodes: nodes, User: "slurm"}
	j.SubmitTime.Number = submit
	return j
}

// A State made after a restart takes in the check jobs the operator queued before it, from the
// job list, asked once: their nodes are busy (no second run beside them), their results are
// taken when they end (a worker resumed for its re-check that fails it is drained again), and
// a pair check's last round is judged as a whole, an earlier round's jobs left out.
func TestStepTakesInTheCheckJobsQueuedBeforeARestart(t *testing.T) {
	ctx := context.Background()
	c := Check{Name: "x", Script: "true", Interval: time.Hour, Timeout: time.Minute, OnFailure: slurmv1alpha1.ActiveCheckDrain}
	p := Check{Name: "bw", Program: slurmv1alpha1.ActiveCheckMPIAllReduce, Interval: time.Hour, Timeout: time.Minute,
		OnFailure: slurmv1alpha1.ActiveCheckDrain, FloorPercent: 50}
	api := &fakeAPI{drained: map[string]string{}, jobs: []slurm.Job{
		onNodes(5, c, 900, "w1"),         // an earlier run on w1, ended
		onNodes(6, c, 1000, "w1"),        // the re-check of w1, resumed for it just before the restart
		onNodes(10, p, 400, "w0", "w1"),  // an earlier round
		onNodes(11, p, 1000, "w0", "w1"), // the last round: w0-w1, w1-w2, w2-w0
		onNodes(12, p, 1001, "w1", "w2"),
		onNodes(13, p, 1001, "w0", "w2"),
		{ID: 14, Name: "someone's", State: []string{"RUNNING"}, RequiredNodes: []string{"w0"}},
		// A user's job named as a check's: never taken in (a KubernetesJob check cancels its
		// holder once its pod ends).
		{ID: 15, Name: c.JobName(), State: []string{"RUNNING"}, RequiredNodes: []string{"w2"}, User: "alice", SubmitTime: slurm.Number{Number: 1002}},
	}}
	api.end(5, "COMPLETED", 0, "fine")
	api.end(10, "COMPLETED", 0, "bandwidth_mbs=10")
	workers := []slurm.Node{node("w0", "", "ALLOCATED"), node("w1", "", "ALLOCATED"), node("w2", "", "ALLOCATED")}
	s := NewState()
	s.Seed("x", time.Now().Add(-2*time.Hour)) // due everywhere, as far as the status says
	s.Seed("bw", time.Now().Add(-2*time.Hour))
	workers[0] = node("w0", "", "IDLE") // idle, due, but its round's job is queued
	if _, err := s.Step(ctx, api, []Check{c, p}, workers, time.Now()); err != nil {
		t.Fatal(err)
	}
	if len(api.submitted) != 0 {
		t.Errorf("submitted %v, want nothing: w1 has its re-check, and the round holds every worker", api.submitted)
	}
	if got := s.inflight[6]; got.check != "x" || fmt.Sprint(got.nodes) != "[w1]" {
		t.Errorf("job 6 taken in as %+v", got)
	}
	if _, ok := s.inflight[5]; ok {
		t.Error("the earlier run on w1 taken in")
	}
	if _, ok := s.inflight[15]; ok {
		t.Error("alice's job, named as a check's, taken in")
	}
	if r := s.rounds["bw"]; r == nil || len(r.pairs) != 3 || fmt.Sprint(r.nodes) != "[w0 w1 w2]" {
		t.Errorf("the round taken in: %+v", s.rounds["bw"])
	}
	// The re-check fails, the round ends with w2 slow: w1 and w2 drained; the list was read once.
	api.end(6, "FAILED", 1, "still bad")
	api.end(11, "COMPLETED", 0, "bandwidth_mbs=1000")
	api.end(12, "COMPLETED", 0, "bandwidth_mbs=100")
	api.end(13, "COMPLETED", 0, "bandwidth_mbs=90")
	workers = []slurm.Node{node("w0", "", "ALLOCATED"), node("w1", "", "IDLE"), node("w2", "", "IDLE")}
	if _, err := s.Step(ctx, api, []Check{c, p}, workers, time.Now()); err != nil {
		t.Fatal(err)
	}
	if api.drained["w1"] != c.Reason("still bad") || !strings.HasPrefix(api.drained["w2"], p.Reason("best all-reduce 100 MB/s")) || len(api.drained) != 2 {
		t.Errorf("drained %v", api.drained)
	}
	if api.listed != 1 {
		t.Errorf("the job list was asked for %d times, want once", api.listed)
	}
}

// A check whose pod cannot start (its image cannot be pulled) says nothing of the worker: no
// drain, its holder ended, and no new run before the interval; a worker the check had drained
// (resumed for the run) is drained again for what its last run found.
func TestAKubernetesJobCheckThatCannotStartLeavesTheWorkerAsItWas(t *testing.T) {
	c := Check{Name: "k", Script: "true", Interval: time.Hour, Timeout: time.Minute, OnFailure: slurmv1alpha1.ActiveCheckDrain, InPod: true, Image: "nope"}
	api := &fakeAPI{drained: map[string]string{}}
	s := NewState()
	now := time.Now()
	// w1 failed this check an hour ago: it is drained by it, and due again.
	s.record(Result{Check: "k", Node: "w1", Output: "xid 79 on GPU 3", At: now.Add(-time.Hour)})
	workers := []slurm.Node{node("w0", "", "IDLE"), node("w1", c.Reason("xid 79 on GPU 3"), "IDLE", "DRAIN")}
	step := func() []Result {
		t.Helper()
		got, err := s.Step(context.Background(), api, []Check{c}, workers, now)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	step()
	if fmt.Sprint(api.submitted) != "[[w0] [w1]]" || fmt.Sprint(api.resumed) != "[w1]" {
		t.Fatalf("submitted %v, resumed %v: want a run on each, w1 resumed for its run", api.submitted, api.resumed)
	}
	workers[1] = node("w1", "", "ALLOCATED")
	for i := range api.jobs {
		api.jobs[i].State = []string{"RUNNING"}
	}
	step()
	for _, id := range []int64{101, 102} {
		*api.pods[id] = PodOutcome{Ended: true, NotRun: true, Output: `its pod cannot start: ImagePullBackOff: Back-off pulling image "nope"`}
	}
	results := step()
	if len(results) != 2 || !results[0].NotRun || !results[1].NotRun {
		t.Fatalf("results %+v: want two runs that could not start", results)
	}
	if fmt.Sprint(api.cancelled) != "[101 102]" && fmt.Sprint(api.cancelled) != "[102 101]" {
		t.Errorf("cancelled %v: want both holders ended", api.cancelled)
	}
	if fmt.Sprint(api.drained) != "map[w1:slurm-operator: check k: xid 79 on GPU 3]" {
		t.Errorf("drained %v: want w1 alone, drained again for its last run", api.drained)
	}
	st := s.Status([]Check{c}, []string{"w0", "w1"})[0]
	if st.Passed != 0 || len(st.Failing) != 1 || st.Failing[0].Node != "w1" {
		t.Errorf("status %+v: want w1 still failing and w0 neither passed nor failed", st)
	}
	workers = []slurm.Node{node("w0", "", "IDLE"), node("w1", c.Reason("xid 79 on GPU 3"), "IDLE", "DRAIN")}
	api.submitted = nil
	step()
	if len(api.submitted) != 0 {
		t.Errorf("submitted %v at once: a run that could not start waits an interval", api.submitted)
	}
}
