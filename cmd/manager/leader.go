package main

import (
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/slurm-k8s/slurm-operator/internal/controller"
)

// leaderElectionID names the Lease the replicas of one installation compete for (in the
// operator's namespace).
const leaderElectionID = "slurm-operator.slurm.hpc.dev"

// managerConfig is what the manager is built from; main and the leader election test build
// it the same way.
type managerConfig struct {
	scheme        *runtime.Scheme
	namespaces    []string
	metricsAddr   string
	metricsSecure bool
	probeAddr     string
	leaderElect   bool
	// leaderElectionNamespace holds the Lease; empty: the namespace of the pod's service
	// account, which is where the chart's leader-election Role grants it.
	leaderElectionNamespace string
}

// options are the controller-runtime manager options of the operator.
func (c managerConfig) options() ctrl.Options {
	return ctrl.Options{
		Scheme:                  c.scheme,
		Cache:                   controller.CacheOptions(c.namespaces...),
		Metrics:                 metricsOptions(c.metricsAddr, c.metricsSecure),
		HealthProbeBindAddress:  c.probeAddr,
		LeaderElection:          c.leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: c.leaderElectionNamespace,
		// A leader that is stopped (an upgrade's rolling update, a drained node) gives the
		// Lease up as it exits, so that a waiting replica takes over at once rather than after
		// the lease duration; main returns as soon as the manager stops, so nothing it runs
		// outlives the leadership.
		LeaderElectionReleaseOnCancel: true,
	}
}
