// Command manager runs the slurm-operator: it reconciles SlurmCluster objects into running
// Slurm clusters. With --local it first starts a local control plane and a demo cluster.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
)

func main() {
	var (
		metricsAddr   string
		probeAddr     string
		leaderElect   bool
		clusterDomain string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address the metrics endpoint binds to; 0 disables it")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address the health probes bind to")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, so that only one manager reconciles at a time")
	flag.StringVar(&clusterDomain, "cluster-domain", "cluster.local", "the Kubernetes cluster's DNS domain")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		log.Error(err, "register built-in kinds")
		os.Exit(1)
	}
	if err := slurmv1alpha1.AddToScheme(scheme); err != nil {
		log.Error(err, "register SlurmCluster")
		os.Exit(1)
	}

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controller.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "slurm-operator.slurm.hpc.dev",
	})
	if err != nil {
		log.Error(err, "create manager")
		os.Exit(1)
	}
	if err := (&controller.SlurmClusterReconciler{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Scheme:        mgr.GetScheme(),
		Recorder:      mgr.GetEventRecorder("slurm-operator"),
		ClusterDomain: clusterDomain,
	}).SetupWithManager(mgr); err != nil {
		log.Error(err, "set up the SlurmCluster controller")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "add health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "add ready check")
		os.Exit(1)
	}
	log.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "run manager")
		os.Exit(1)
	}
}
