package activecheck

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// roundSpread is how far apart in submit time the jobs of one pair round can be: a round's
// jobs are submitted at one look, rounds a look or more apart.
const roundSpread = 30 * time.Second

// recover finds, in slurmctld's job list, the check jobs of the spec's checks (the slurm user's
// jobs of their names) that this State
// does not know (queued by the operator before a restart, and still held by slurmctld:
// pending, running, or ended less than MinJobAge ago), and takes them in as its own. For a
// check run on each worker, the last job on each worker; for a pair check, the jobs of its
// last round, which is judged when they have all ended. Results already taken before the
// restart are taken again, to the same effect: a drain Slurm already has is not renewed.
func (s *State) recover(ctx context.Context, api API, checks map[string]Check, now time.Time) error {
	jobs, err := api.Jobs(ctx)
	if err != nil {
		return err
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID < jobs[j].ID })
	lastOnNode := map[[2]string]int64{}  // check, node -> the last job
	pairJobs := map[string][]slurm.Job{} // check -> its pair jobs
	nodesOf := map[int64][]string{}      // job -> its nodes
	for _, j := range jobs {
		name, ok := strings.CutPrefix(j.Name, JobNamePrefix)
		c, known := checks[name]
		// Only the operator's own (slurmrestd submits as the slurm user): a user's job that
		// bears a check's name is never taken for one, nor cancelled as a holder.
		if _, mine := s.inflight[j.ID]; !ok || !known || mine || !c.Runs() || j.User != slurmfacts.SlurmUser {
			continue
		}
		nodes := j.NodeNames()
		if len(nodes) == 0 {
			continue
		}
		nodesOf[j.ID] = nodes
		if c.Pairs() {
			if len(nodes) == 2 {
				pairJobs[name] = append(pairJobs[name], j)
			}
			continue
		}
		for _, n := range nodes {
			lastOnNode[[2]string{name, n}] = j.ID // IDs ascend: the last one stays
		}
	}
	for key, id := range lastOnNode {
		if q, ok := s.inflight[id]; ok {
			q.nodes = append(q.nodes, key[1])
			s.inflight[id] = q
			continue
		}
		s.inflight[id] = queued{check: key[0], nodes: []string{key[1]}}
	}
	for name, js := range pairJobs {
		if s.rounds[name] != nil {
			continue
		}
		latest := int64(0)
		for _, j := range js {
			latest = max(latest, j.SubmitTime.Number)
		}
		c := checks[name]
		r := &round{started: now, giveUp: now.Add(3*c.Timeout + time.Minute), pairs: map[int64][2]string{},
			bandwidth: map[[2]string]float64{}, failed: map[[2]string]string{}}
		seen := map[string]bool{}
		for _, j := range js {
			if time.Duration(latest-j.SubmitTime.Number)*time.Second > roundSpread {
				continue // an earlier round's
			}
			nodes := nodesOf[j.ID]
			r.pairs[j.ID] = [2]string{nodes[0], nodes[1]}
			s.inflight[j.ID] = queued{check: name, nodes: nodes}
			for _, n := range nodes {
				if !seen[n] {
					seen[n] = true
					r.nodes = append(r.nodes, n)
				}
			}
		}
		sort.Strings(r.nodes)
		s.rounds[name] = r
	}
	return nil
}
