package activecheck

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// maxFailing is how many failing workers the status lists per check.
const maxFailing = 32

// Status is what each check found, for the SlurmCluster's status: when it last ended on a
// worker, when it is next due on one, how many workers passed and which failed. Only what runs
// changes it, so a look that runs nothing writes nothing.
func (s *State) Status(checks []Check, workers []string) []slurmv1alpha1.ActiveCheckStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []slurmv1alpha1.ActiveCheckStatus
	for _, c := range checks {
		st := slurmv1alpha1.ActiveCheckStatus{Name: c.Name}
		var lastRun, next time.Time
		for _, w := range workers {
			r, ok := s.last[c.Name][w]
			if ok && r.Output != "" && r.At.After(lastRun) {
				lastRun = r.At
			}
			if at := s.lastRun(c.Name, w); !at.IsZero() && (next.IsZero() || at.Add(c.Interval).Before(next)) {
				next = at.Add(c.Interval)
			}
			switch {
			case !ok || r.Output == "":
			case r.Passed:
				st.Passed++
			case len(st.Failing) < maxFailing:
				st.Failing = append(st.Failing, slurmv1alpha1.ActiveCheckFailure{Node: w, Output: r.Output, Since: timeOrNil(r.FailingSince)})
			}
		}
		if lastRun.IsZero() {
			lastRun = s.seeded[c.Name]
		}
		st.LastRunTime, st.NextRunTime = timeOrNil(lastRun), timeOrNil(next)
		sort.Slice(st.Failing, func(i, j int) bool { return st.Failing[i].Node < st.Failing[j].Node })
		out = append(out, st)
	}
	return out
}

// NextCheck is when the check a drain reason names runs again on the node, if it is one of the
// checks and has run there.
func (s *State) NextCheck(checks []Check, reason, node string) (time.Time, bool) {
	name, ok := CheckOfReason(reason)
	if !ok {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range checks {
		if c.Name == name {
			if at := s.lastRun(name, node); !at.IsZero() {
				return at.Add(c.Interval), true
			}
		}
	}
	return time.Time{}, false
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewTime(t.Truncate(time.Second))
	return &m
}
