package activecheck

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// API is what the checks need: slurmrestd, and the Kubernetes Jobs of KubernetesJob checks.
type API interface {
	SlurmAPI
	Pods
}

// Pods runs the checks that run as Kubernetes Jobs.
type Pods interface {
	// PodCheck reports how the Kubernetes Job that runs check c on node, while the Slurm job
	// holder holds the node, ended (Ended false: not yet, or no such Job). With start, it
	// creates that Job when there is none.
	PodCheck(ctx context.Context, c Check, node string, holder int64, start bool) (PodOutcome, error)
}

// PodOutcome is how a check's Kubernetes Job ended.
type PodOutcome struct {
	Ended, Passed bool
	// NotRun (with Ended) says the check never started: its pod cannot start (an image that
	// cannot be pulled, say), which says nothing of the worker. Output says why.
	NotRun bool
	// Output is the end of the check's output (its container's termination message), or why
	// the Job failed when the check said nothing.
	Output string
}

// SlurmOnly is API for callers without Kubernetes: a KubernetesJob check fails to start.
func SlurmOnly(api SlurmAPI) API { return slurmOnly{api} }

type slurmOnly struct{ SlurmAPI }

func (slurmOnly) PodCheck(context.Context, Check, string, int64, bool) (PodOutcome, error) {
	return PodOutcome{}, errors.New("a KubernetesJob check needs a Kubernetes client")
}

// SlurmAPI is what the checks need of slurmrestd.
type SlurmAPI interface {
	// Job returns a job, and false when slurmctld no longer knows it.
	Job(ctx context.Context, id int64) (slurm.Job, bool, error)
	// Jobs lists every job slurmctld holds; asked once per State, to find the check jobs an
	// operator before a restart queued.
	Jobs(ctx context.Context) ([]slurm.Job, error)
	Submit(ctx context.Context, j slurm.BatchJob) (int64, error)
	Drain(ctx context.Context, name, reason string) error
	ResumeIfOwned(ctx context.Context, name string) (bool, error)
	SetNodeComment(ctx context.Context, name, comment string) error
	// CancelJob cancels a job (a KubernetesJob check's holder, once its pod has ended).
	CancelJob(ctx context.Context, id int64) error
}

// jobPriority is the fixed priority of check jobs: above any a user's job gets, so a check job
// waiting for a node (one returning from the check's own drain) starts before the user's.
const jobPriority = 4_000_000_000

// Result is one run of a check on one worker.
type Result struct {
	Check  string
	Node   string
	Passed bool
	Output string
	At     time.Time
	// FailingSince is, for a failed run, when the worker's unbroken run of failures of this
	// check began (the At of the first).
	FailingSince time.Time
	// NotRun says the check could not run on the worker (Output says why): the worker keeps
	// what its last run found, and the check is due again an interval later.
	NotRun bool
}

// State is what the checks of one cluster remember between looks: when each check last ran
// on each worker and what it found, the check jobs queued, and the pair rounds in flight. It
// lives in the operator's memory; after a restart a check is due again on each worker at the
// interval after the check's last run recorded in the status (Seed).
type State struct {
	mu       sync.Mutex
	last     map[string]map[string]Result // check -> node -> last result
	seeded   map[string]time.Time         // check -> the status's last run, for workers not yet run
	inflight map[int64]queued             // the check jobs queued and not yet read
	away     map[string]bool              // nodes out of service, not by a check, at the last look
	rounds   map[string]*round            // pair checks: the round in flight
	// recovered is set once the check jobs queued before this State existed were found.
	recovered bool
}

// NewState returns an empty State.
func NewState() *State {
	return &State{last: map[string]map[string]Result{}, seeded: map[string]time.Time{}, inflight: map[int64]queued{},
		away: map[string]bool{}, rounds: map[string]*round{}}
}

// Seed sets, for a check, when it last ran (from the status written before a restart): workers
// without a run of their own are due an interval after it, not at once.
func (s *State) Seed(check string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seeded[check]; !ok {
		s.seeded[check] = at
	}
}

// lastRun is when the check last ran on the node (zero: never, so it is due).
func (s *State) lastRun(check, node string) time.Time {
	if r, ok := s.last[check][node]; ok {
		return r.At
	}
	return s.seeded[check]
}

func (s *State) record(r Result) {
	if s.last[r.Check] == nil {
		s.last[r.Check] = map[string]Result{}
	}
	if !r.Passed {
		r.FailingSince = r.At
		if prev, ok := s.last[r.Check][r.Node]; ok && !prev.Passed && !prev.FailingSince.IsZero() {
			r.FailingSince = prev.FailingSince
		}
	}
	s.last[r.Check][r.Node] = r
}

// notRun notes a run that could not start: the check is due again an interval later, and the
// worker's last result stays as it was. It returns that result, if the check has one there.
func (s *State) notRun(r Result) (Result, bool) {
	if s.last[r.Check] == nil {
		s.last[r.Check] = map[string]Result{}
	}
	last, ok := s.last[r.Check][r.Node]
	ok = ok && last.Output != ""
	if !ok {
		last = Result{Check: r.Check, Node: r.Node, Passed: true}
	}
	last.At = r.At
	s.last[r.Check][r.Node] = last
	return last, ok
}

// forget marks the check as due on the node now (it came back from a drain).
func (s *State) forget(check, node string) {
	if r, ok := s.last[check][node]; ok {
		r.At = time.Time{}
		s.last[check][node] = r
		return
	}
	if s.last[check] == nil {
		s.last[check] = map[string]Result{}
	}
	s.last[check][node] = Result{Check: check, Node: node, Passed: true}
}

// queued is a check job the operator submitted: its check and nodes.
type queued struct {
	check string
	nodes []string
}

// ended reports whether a job is over.
func ended(j slurm.Job) bool {
	for _, f := range []string{"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STAGE_OUT"} {
		if j.Has(f) {
			return false
		}
	}
	return len(j.State) > 0
}

// neverRan reports whether an ended job never started: cancelled while pending, or past its
// deadline. It says nothing of the node.
func neverRan(j slurm.Job) bool {
	return j.Has("DEADLINE") || (j.Has("CANCELLED") && j.Nodes == "")
}

// outcome is what a check job's end says: passed, and the output.
func outcome(j slurm.Job) (bool, string) {
	out := strings.TrimSpace(j.Comment)
	if j.Has("COMPLETED") && j.Exit.ReturnCode.Number == 0 {
		return true, out
	}
	what := fmt.Sprintf("%s, exit %d", strings.Join(j.State, ","), j.Exit.ReturnCode.Number)
	if j.Has("TIMEOUT") {
		what = "did not end within its timeout"
	}
	if out == "" {
		return false, what
	}
	if !j.Has("FAILED") {
		out = what + ": " + out
	}
	return false, clip(out)
}

func clip(s string) string {
	if len(s) <= OutputMax {
		return s
	}
	return s[len(s)-OutputMax:]
}

// available reports whether a check job may start on the node now: idle and in service, or
// drained by this check (a run that passes resumes it).
func available(n slurm.Node, c Check) bool {
	if n.Busy() || n.Down() || n.Has("FAIL") || n.Has("COMPLETING") || n.Has("RESERVED") || n.Has("MAINT") ||
		n.Has("POWERED_DOWN") || n.Has("POWERING_DOWN") || n.Has("POWERING_UP") || n.Has("FUTURE") || !n.Has("IDLE") {
		return false
	}
	return !n.Has("DRAIN") || c.DrainedBy(n.Reason)
}

// away reports whether a node is out of service for a cause other than a check: down, failed,
// or drained by someone else. Not a bare NOT_RESPONDING: slurmctld sets it for a missed ping,
// and a node resumed from a drain shows it for a moment, which is no return from anywhere.
func away(n slurm.Node) bool {
	if n.Has("DOWN") || n.Has("FAIL") {
		return true
	}
	_, byCheck := CheckOfReason(n.Reason)
	return n.Has("DRAIN") && !byCheck
}

// Step looks at the check jobs and the workers once: it takes the results of the jobs that
// ended (draining, commenting or resuming their nodes), and submits the checks that are due
// on the workers that are idle. workers are Slurm's nodes that are the cluster's workers. It
// returns the results taken at this look.
func (s *State) Step(ctx context.Context, api API, checks []Check, workers []slurm.Node, now time.Time) ([]Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byName := map[string]Check{}
	for _, c := range checks {
		byName[c.Name] = c
	}
	byNode := map[string]slurm.Node{}
	for _, n := range workers {
		byNode[n.Name] = n
	}

	// Once, at the first look: the check jobs an operator before a restart queued, so that
	// their results are taken (a worker resumed for its re-check and failing it is drained
	// again) and no second run is queued beside them.
	if !s.recovered && anyRuns(checks) {
		if err := s.recover(ctx, api, byName, now); err != nil {
			return nil, fmt.Errorf("find the check jobs queued before: %w", err)
		}
		s.recovered = true
	}

	// Only the check jobs the operator queued are asked for, one by one: never the whole job
	// list, which on a busy cluster is tens of megabytes at every look.
	busy := map[string]bool{} // nodes with a check job queued or running
	var results []Result
	var errs []error
	for id, q := range s.inflight {
		j, found, err := api.Job(ctx, id)
		if err != nil {
			errs = append(errs, err)
			for _, n := range q.nodes {
				busy[n] = true // unknown: as if it ran
			}
			continue
		}
		c, ok := byName[q.check]
		if found && !ended(j) {
			for _, n := range q.nodes {
				busy[n] = true
			}
			if !ok || !c.Kubernetes() || !j.Has("RUNNING") {
				continue
			}
			// The holder runs: the check's pod is started, or has ended, and then the holder
			// is let go.
			out, err := api.PodCheck(ctx, c, q.nodes[0], id, true)
			if err != nil {
				errs = append(errs, fmt.Errorf("check %s on %s: %w", c.Name, q.nodes[0], err))
			}
			if !out.Ended {
				continue
			}
			delete(s.inflight, id)
			results = append(results, podResult(c, q.nodes[0], out, now))
			if err := api.CancelJob(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("end the job %d that held %s for its check %s: %w", id, q.nodes[0], c.Name, err))
			}
			continue
		}
		delete(s.inflight, id)
		if !found || !ok || neverRan(j) {
			continue // purged unread, its check removed, or it never started: no word on the nodes
		}
		if c.Kubernetes() {
			if r, ok := s.podEnded(ctx, api, c, q.nodes[0], id, j, now); ok {
				results = append(results, r)
			}
			continue
		}
		if c.Pairs() {
			if r := s.rounds[c.Name]; r != nil {
				r.take(id, j)
			}
			continue
		}
		passed, out := outcome(j)
		for _, n := range q.nodes {
			// The operator's clock, not slurmctld's: the interval is counted on the clock
			// that decides when a check is due.
			results = append(results, Result{Check: c.Name, Node: n, Passed: passed, Output: out, At: now})
		}
	}
	for name, r := range s.rounds {
		c, ok := byName[name]
		switch {
		case !ok || !c.Pairs():
			delete(s.rounds, name)
		case r.open(s.inflight) && now.Before(r.giveUp):
		default:
			delete(s.rounds, name)
			results = append(results, r.judge(c, now)...)
		}
	}

	for _, r := range results {
		if r.NotRun {
			// The worker keeps its standing: a worker this check had drained (and resumed for
			// the run) is drained again for what its last run found.
			if last, ok := s.notRun(r); ok && !last.Passed {
				if n, ok := byNode[r.Node]; ok {
					errs = append(errs, react(ctx, api, byName[r.Check], n, last))
				}
			}
			continue
		}
		s.record(r)
		if n, ok := byNode[r.Node]; ok {
			errs = append(errs, react(ctx, api, byName[r.Check], n, r))
		}
	}

	// A check taken out of the spec lifts its drains: nothing would run it again.
	for _, n := range workers {
		if name, ok := CheckOfReason(n.Reason); ok && n.Has("DRAIN") {
			if _, still := byName[name]; !still {
				if _, err := api.ResumeIfOwned(ctx, n.Name); err != nil {
					errs = append(errs, fmt.Errorf("resume %s, drained by the removed check %s: %w", n.Name, name, err))
				}
			}
		}
	}

	// A worker back from a drain or a down state set by something else runs its checks first.
	for _, n := range workers {
		out := away(n)
		if s.away[n.Name] && !out {
			for _, c := range checks {
				if c.AfterDrain {
					s.forget(c.Name, n.Name)
				}
			}
		}
		s.away[n.Name] = out
	}

	for _, c := range checks {
		if !c.Runs() {
			continue
		}
		var err error
		if c.Pairs() {
			err = s.startRound(ctx, api, c, workers, busy, now)
		} else {
			err = s.submitEach(ctx, api, c, workers, busy, now)
		}
		errs = append(errs, err)
	}
	return results, errors.Join(errs...)
}

// anyRuns reports whether any of the checks runs a job.
func anyRuns(checks []Check) bool {
	for _, c := range checks {
		if c.Runs() {
			return true
		}
	}
	return false
}

// due reports whether the check is due on the node.
func (s *State) due(c Check, node string, now time.Time) bool {
	last := s.lastRun(c.Name, node)
	return last.IsZero() || now.Sub(last) >= c.Interval
}

// submitEach submits the check on each worker where it is due and that is idle.
func (s *State) submitEach(ctx context.Context, api API, c Check, workers []slurm.Node, busy map[string]bool, now time.Time) error {
	var errs []error
	for _, n := range workers {
		if busy[n.Name] || !available(n, c) || !s.due(c, n.Name, now) {
			continue
		}
		if _, err := s.submit(ctx, api, c, []slurm.Node{n}, now.Add(c.Timeout)); err != nil {
			errs = append(errs, err)
			continue
		}
		busy[n.Name] = true
	}
	return errors.Join(errs...)
}

// submit submits one run of the check on nodes, then returns to service those the check had
// drained: the run, queued first with the top priority, takes them before any user's job.
func (s *State) submit(ctx context.Context, api API, c Check, nodes []slurm.Node, startBy time.Time) (int64, error) {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	j := slurm.BatchJob{Name: c.JobName(), Script: c.BatchScript(), Nodes: names, Partitions: commonPartitions(nodes),
		TimeLimit: c.Timeout, StartBy: startBy, Priority: jobPriority}
	if c.Kubernetes() {
		j.TimeLimit = c.Timeout + holdMargin
	}
	if c.GPUOnly && c.GPUs > 0 {
		j.TRESPerNode = fmt.Sprintf("gres/gpu:%d", c.GPUs)
	}
	id, err := api.Submit(ctx, j)
	if err != nil {
		return 0, fmt.Errorf("submit check %s on %s: %w", c.Name, strings.Join(names, ","), err)
	}
	s.inflight[id] = queued{check: c.Name, nodes: names}
	for _, n := range nodes {
		if n.Has("DRAIN") && c.DrainedBy(n.Reason) {
			if _, err := api.ResumeIfOwned(ctx, n.Name); err != nil {
				return id, fmt.Errorf("resume %s for its check %s: %w", n.Name, c.Name, err)
			}
		}
	}
	return id, nil
}

// commonPartitions are the partitions every node is in.
func commonPartitions(nodes []slurm.Node) []string {
	count := map[string]int{}
	for _, n := range nodes {
		for _, p := range n.Partitions {
			count[p]++
		}
	}
	var out []string
	for p, k := range count {
		if k == len(nodes) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// react does what a result asks of its node.
func react(ctx context.Context, api API, c Check, n slurm.Node, r Result) error {
	switch {
	case !r.Passed && c.OnFailure == slurmv1alpha1.ActiveCheckDrain:
		// A drain or down state that someone else set stays theirs; a check's own is renewed.
		if away(n) || n.Reason == c.Reason(r.Output) {
			return nil
		}
		if err := api.Drain(ctx, n.Name, c.Reason(r.Output)); err != nil {
			return fmt.Errorf("drain %s after its check %s failed: %w", n.Name, c.Name, err)
		}
	case !r.Passed && c.OnFailure == slurmv1alpha1.ActiveCheckComment:
		if n.Comment != c.comment(r.Output) {
			return api.SetNodeComment(ctx, n.Name, c.comment(r.Output))
		}
	case r.Passed && n.Has("DRAIN") && c.DrainedBy(n.Reason):
		if _, err := api.ResumeIfOwned(ctx, n.Name); err != nil {
			return fmt.Errorf("resume %s after its check %s passed: %w", n.Name, c.Name, err)
		}
	case r.Passed && c.commented(n.Comment):
		return api.SetNodeComment(ctx, n.Name, "")
	}
	return nil
}
