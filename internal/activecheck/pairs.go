package activecheck

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// A bandwidth check runs in rounds: one job per pair of workers (a ring over the idle workers,
// so each is measured against two others), judged together when every job of the round ended.
// A worker fails when its best pair is below the floor (a percentage of the median worker's
// best): a slow link or NIC shows in every pair it is in, a slow neighbour in one.
type round struct {
	started time.Time
	giveUp  time.Time
	nodes   []string
	pairs   map[int64][2]string
	// bandwidth of each pair that passed, in MB/s; failed holds the output of each that failed.
	bandwidth map[[2]string]float64
	failed    map[[2]string]string
}

var bandwidthLine = regexp.MustCompile(`bandwidth_mbs=([0-9.]+)`)

// ring pairs each worker with the next one, the last with the first: two workers make one pair,
// n > 2 make n.
func ring(nodes []string) [][2]string {
	switch len(nodes) {
	case 0, 1:
		return nil
	case 2:
		return [][2]string{{nodes[0], nodes[1]}}
	}
	out := make([][2]string, len(nodes))
	for i := range nodes {
		out[i] = [2]string{nodes[i], nodes[(i+1)%len(nodes)]}
	}
	return out
}

// startRound starts a round of the check when it is due: its interval passed since the last
// round, or a worker is due on its own (new, or back from a drain), and two or more workers are
// idle.
func (s *State) startRound(ctx context.Context, api API, c Check, workers []slurm.Node, busy map[string]bool, now time.Time) error {
	if s.rounds[c.Name] != nil {
		return nil
	}
	var idle []slurm.Node
	due := false
	for _, n := range workers {
		if busy[n.Name] || !available(n, c) {
			continue
		}
		idle = append(idle, n)
		due = due || s.due(c, n.Name, now)
	}
	if !due || len(idle) < 2 {
		return nil
	}
	names := make([]string, len(idle))
	byName := map[string]slurm.Node{}
	for i, n := range idle {
		names[i] = n.Name
		byName[n.Name] = n
	}
	// Pairs that share a worker run one after the other: each may wait for the two before it.
	r := &round{started: now, giveUp: now.Add(3*c.Timeout + time.Minute), nodes: names, pairs: map[int64][2]string{},
		bandwidth: map[[2]string]float64{}, failed: map[[2]string]string{}}
	var errs []error
	for _, p := range ring(names) {
		id, err := s.submit(ctx, api, c, []slurm.Node{byName[p[0]], byName[p[1]]}, r.giveUp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.pairs[id] = p
		busy[p[0]], busy[p[1]] = true, true
	}
	if len(r.pairs) > 0 {
		s.rounds[c.Name] = r
	}
	return errors.Join(errs...)
}

// take records the end of one of the round's jobs.
func (r *round) take(id int64, j slurm.Job) {
	p, ok := r.pairs[id]
	if !ok || neverRan(j) {
		return
	}
	passed, out := outcome(j)
	if m := bandwidthLine.FindStringSubmatch(out); passed && m != nil {
		if bw, err := strconv.ParseFloat(m[1], 64); err == nil {
			r.bandwidth[p] = bw
			return
		}
	}
	if passed {
		out = "no bandwidth in the output: " + out
	}
	r.failed[p] = out
}

// open reports whether a job of the round is still queued or running.
func (r *round) open(inflight map[int64]queued) bool {
	for id := range r.pairs {
		if _, ok := inflight[id]; ok {
			return true
		}
	}
	return false
}

// judge turns the round's pairs into a result for each worker measured.
func (r *round) judge(c Check, now time.Time) []Result {
	best := map[string]float64{}
	with := map[string]string{}
	failedOut := map[string]string{}
	for p, bw := range r.bandwidth {
		for i, n := range p {
			if bw > best[n] {
				best[n], with[n] = bw, p[1-i]
			}
		}
	}
	for p, out := range r.failed {
		for _, n := range p {
			failedOut[n] = out
		}
	}
	var values []float64
	for _, bw := range best {
		values = append(values, bw)
	}
	median := medianOf(values)
	floor := median * float64(c.FloorPercent) / 100
	var out []Result
	for _, n := range r.nodes {
		res := Result{Check: c.Name, Node: n, At: now}
		bw, measured := best[n]
		switch {
		case measured && bw >= floor:
			res.Passed = true
			res.Output = fmt.Sprintf("best all-reduce %.0f MB/s (with %s); median worker %.0f MB/s", bw, with[n], median)
		case measured:
			res.Output = fmt.Sprintf("best all-reduce %.0f MB/s (with %s), below %d%% of the median worker's %.0f MB/s", bw, with[n], c.FloorPercent, median)
		case failedOut[n] != "":
			res.Output = clip("every all-reduce failed: " + failedOut[n])
		default:
			continue // its pairs never started: no word on it
		}
		out = append(out, res)
	}
	return out
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
