package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/activecheck"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// checkAPI is what the active checks ask of Slurm: jobs through the cluster's client, drains and
// resumes through the reconcile's one client, so that the phases after it ask for the nodes again.
type checkAPI struct {
	activecheck.SlurmAPI
	checkPods
	once *slurmOnce
}

func (c checkAPI) Drain(ctx context.Context, name, reason string) error {
	return c.once.Drain(ctx, name, reason)
}

func (c checkAPI) ResumeIfOwned(ctx context.Context, name string) (bool, error) {
	return c.once.ResumeIfOwned(ctx, name)
}

// checkState is the active checks' memory of a cluster, made at its first look and seeded with
// the last runs its status recorded (so that a restarted operator does not run every check on
// every worker at once).
func (r *SlurmClusterReconciler) checkState(key types.NamespacedName, sc *slurmv1alpha1.SlurmCluster) *activecheck.State {
	if st, ok := r.activeChecks.Load(key); ok {
		return st.(*activecheck.State)
	}
	st := activecheck.NewState()
	for _, c := range sc.Status.ActiveChecks {
		if c.LastRunTime != nil {
			st.Seed(c.Name, c.LastRunTime.Time)
		}
	}
	actual, _ := r.activeChecks.LoadOrStore(key, st)
	return actual.(*activecheck.State)
}

// runActiveChecks takes the results of the check jobs that ended (draining, commenting or
// resuming their workers) and submits those that are due on idle workers. A Slurm that cannot
// be asked changes nothing, and stops no other phase: the checks wait for the next look.
func (r *SlurmClusterReconciler) runActiveChecks(ctx context.Context, s *reconcileScope) error {
	sc := s.desired
	key := types.NamespacedName{Namespace: sc.Namespace, Name: sc.Name}
	once := r.slurmFor(s).(*slurmOnce)
	jobs, ok := once.api.(activecheck.SlurmAPI)
	if !ok {
		return nil // a stand-in for slurmctld that runs no jobs
	}
	checks := activecheck.FromSpec(sc, int(s.facts.gpu.GPU.Total()))
	nodes, err := once.Nodes(ctx)
	var workers []slurm.Node
	leftover := false // a drain of a check taken out of the spec, to lift
	for _, n := range nodes {
		if isWorkerNode(sc, n.Name) {
			workers = append(workers, n)
			_, byCheck := activecheck.CheckOfReason(n.Reason)
			leftover = leftover || byCheck
		}
	}
	if len(checks) == 0 && !leftover {
		if err == nil {
			r.activeChecks.Delete(key)
			s.facts.checksDecided, s.facts.activeChecks = true, nil
		}
		return nil
	}
	st := r.checkState(key, sc)
	if err == nil {
		results, err := st.Step(ctx, checkAPI{SlurmAPI: jobs, checkPods: checkPods{r: r, sc: sc}, once: once}, checks, workers, time.Now())
		if err != nil {
			log.FromContext(ctx).Error(err, "active checks")
		}
		for _, res := range results {
			if res.NotRun {
				r.workerEvent(s.cluster, res.Node, "Warning", "ActiveCheckNotRun", "ActiveCheck",
					fmt.Sprintf("check %s could not run on %s: %s", res.Check, res.Node, res.Output))
				continue
			}
			if !res.Passed {
				r.workerEvent(s.cluster, res.Node, "Warning", "ActiveCheckFailed", "ActiveCheck",
					fmt.Sprintf("check %s failed on %s: %s", res.Check, res.Node, res.Output))
			}
		}
	}
	names := make([]string, 0, len(workers))
	for _, n := range workers {
		names = append(names, n.Name)
	}
	s.facts.checksDecided = true
	s.facts.activeChecks = st.Status(checks, names)
	s.facts.nextCheck = map[string]time.Time{}
	for _, n := range workers {
		if at, ok := st.NextCheck(checks, n.Reason, n.Name); ok && n.Has("DRAIN") {
			s.facts.nextCheck[n.Name] = at
		}
	}
	return nil
}
