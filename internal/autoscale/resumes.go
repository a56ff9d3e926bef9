package autoscale

import (
	"sort"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// Resumes follows an elastic set's nodes through their power-ups from one look at slurmctld's
// node states to the next, and says how each power-up ended: the node came up (its pod's
// slurmd registered) or it failed (Slurm's ResumeTimeout passed, or an admin downed it, and
// Slurm holds it powered down and DOWN). A node that came up is then kept until the jobs it
// was powered up for have their nodes ready, so that their wait can be taken (Waits). A node
// whose power-up began and ended between two looks is not seen. The zero value is ready to use.
type Resumes struct {
	poweringUp map[string]powerUp
	ready      map[string]powerUp // came up; the waits of its jobs not taken yet
	counted    map[int64]bool     // jobs whose wait was taken
	last       time.Time          // the previous look
}

type powerUp struct{ since, after time.Time }

// Ended is a power-up that ended between two looks.
type Ended struct {
	Node string
	// Since is the first look that saw the node powering up; After the look before it (zero
	// when there was none): the power-up began between the two, and the jobs it was for were
	// given the node after After.
	Since, After time.Time
	// Failed says that the node did not come up: Slurm holds it powered down and DOWN.
	Failed bool
}

// forgetReadyAfter is how long a node that came up waits for its jobs' waits to be taken (the
// job list could not be read, say) before it is forgotten.
const forgetReadyAfter = 30 * time.Minute

// Observe takes one look at the set's nodes (slurmctld's answer, by name) at now and returns
// the power-ups that ended since the last look, by node name. A node missing from the answer
// is forgotten (the set shrank, or slurmctld no longer lists it).
func (r *Resumes) Observe(s Set, nodes map[string]slurm.Node, now time.Time) []Ended {
	if r.poweringUp == nil {
		r.poweringUp, r.ready, r.counted = map[string]powerUp{}, map[string]powerUp{}, map[int64]bool{}
	}
	prev := r.last
	r.last = now
	var out []Ended
	inSet := make(map[string]bool, s.MaxSize)
	for i := int32(0); i < s.MaxSize; i++ {
		name := s.NodeName(i)
		inSet[name] = true
		n, listed := nodes[name]
		p, watched := r.poweringUp[name]
		switch {
		case !listed:
			delete(r.poweringUp, name)
		case PoweringUp(n):
			if !watched {
				r.poweringUp[name] = powerUp{since: now, after: prev}
			}
		case !watched:
		case Off(n) && n.Has("DOWN"):
			out = append(out, Ended{Node: name, Since: p.since, After: p.after, Failed: true})
			delete(r.poweringUp, name)
		case Off(n):
			// Asked down again before it came up (an admin's power_down): neither.
			delete(r.poweringUp, name)
		default:
			out = append(out, Ended{Node: name, Since: p.since, After: p.after})
			r.ready[name] = p
			delete(r.poweringUp, name)
		}
	}
	for name := range r.poweringUp { // nodes above a maxSize that shrank
		if !inSet[name] {
			delete(r.poweringUp, name)
		}
	}
	for name, p := range r.ready {
		if !inSet[name] || now.Sub(p.since) > forgetReadyAfter {
			delete(r.ready, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Watching says whether a power-up of the set is being followed.
func (r *Resumes) Watching() bool { return len(r.poweringUp) > 0 }

// AwaitingJobs says whether a node came up whose jobs' waits are not taken yet: the next look
// needs the job list (Waits).
func (r *Resumes) AwaitingJobs() bool { return len(r.ready) > 0 }

// Waits takes, from slurmctld's job list, how long each job that a power-up was for waited
// from its submit until all its nodes were ready. Slurm gives a job its nodes while they are
// powered down, keeps it CONFIGURING until every one has registered, and then sets its start
// time to that moment: the wait is the start time less the submit time, taken once per job
// (a two-node job is found from both nodes) and once its CONFIGURING ends. The jobs of a node
// that came up are those that hold, or held, it and were given it after the power-up began;
// a short job may have ended by the look that finds it. A node with no such job (the operator
// powered it up itself: a node within minSize, or a hole below a node Slurm chose) gives none.
func (r *Resumes) Waits(jobs []slurm.Job) []time.Duration {
	var out []time.Duration
	listed := make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		listed[j.ID] = true
	}
	for id := range r.counted { // jobs slurmctld no longer lists are never found again
		if !listed[id] {
			delete(r.counted, id)
		}
	}
	for name, p := range r.ready {
		configuring := false
		var done []slurm.Job
		for _, j := range jobs {
			if !heldAfter(j, name, p.after) {
				continue
			}
			if j.Has("CONFIGURING") {
				configuring = true
			} else if !r.counted[j.ID] {
				done = append(done, j)
			}
		}
		for _, j := range done {
			r.counted[j.ID] = true
			out = append(out, max(time.Duration(j.StartTime.Number-j.SubmitTime.Number)*time.Second, 0))
		}
		if !configuring {
			delete(r.ready, name)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i] < out[k] })
	return out
}

// heldAfter says whether the job holds, or held, the node and was given it after the time.
func heldAfter(j slurm.Job, node string, after time.Time) bool {
	if j.Has("PENDING") || !j.SubmitTime.Set || !j.StartTime.Set || j.StartTime.Number == 0 ||
		j.StartTime.Number < after.Unix() {
		return false
	}
	for _, held := range j.NodeNames() {
		if held == node {
			return true
		}
	}
	return false
}
