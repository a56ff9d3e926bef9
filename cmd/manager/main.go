// Command manager runs the slurm-operator: it reconciles SlurmCluster objects into running
// Slurm clusters. With --local it first starts a local control plane (etcd and kube-apiserver
// built by hack/test-assets.sh), installs the CRDs and applies a demo cluster.
package main

import (
	"context"
	"flag"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/policy"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

func main() {
	var (
		metricsAddr     string
		metricsInsecure bool
		imagePrefixes   string
		watchNamespaces string
		hostPaths       string
		probeAddr       string
		leaderElect     bool
		clusterDomain   string
		maxConcurrent   int
		outOfService    time.Duration
		tokenLifetime   time.Duration
		priorityClass   string
		slurmPoll       time.Duration
		local           bool
		localOnce       bool
		localSample     string
		localCRDs       string
		localConfig     string
		localNS         string
		upgradeCRD      bool
		operatorNS      string
		operatorLabels  string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address the metrics endpoint binds to; 0 disables it")
	flag.StringVar(&imagePrefixes, "allowed-image-prefixes", "", "comma-separated prefixes every image of a SlurmCluster must start with (empty: any image)")
	flag.StringVar(&hostPaths, "allowed-hostpath-prefixes", "", "comma-separated node directories a SlurmCluster's hostPath volume sources must be in; \"none\": no hostPath (empty: any but the node's system directories)")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "comma-separated namespaces whose SlurmClusters are reconciled (empty: all); with a namespaced install's Roles the operator has no rights elsewhere")
	flag.BoolVar(&metricsInsecure, "metrics-insecure", false, "serve metrics over plain HTTP to anyone (by default: HTTPS, and only to callers the API server authenticates and authorizes for GET /metrics)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address the health probes bind to")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader among the replicas (a Lease in the pod's namespace), so that only one manager reconciles at a time; the chart turns it on")
	flag.IntVar(&maxConcurrent, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "how many SlurmClusters are reconciled at once (one cluster never twice at once)")
	flag.DurationVar(&slurmPoll, "slurm-poll-interval", controller.DefaultSlurmPollInterval, "how often each cluster's node states are read from slurmctld while it answers: a worker that starts a job is protected from evictions (labelled busy) within this time")
	flag.StringVar(&priorityClass, "control-plane-priority-class", "", "the PriorityClass of every cluster's slurmctld, slurmdbd and MariaDB pods; it must exist (the chart makes slurm-control-plane); empty: none")
	flag.DurationVar(&tokenLifetime, "exporter-token-lifetime", controller.DefaultExporterTokenLifetime, "how long the exporter's token (for the read-only Slurm user slurm-metrics) is valid; it is renewed when half is left")
	flag.DurationVar(&outOfService, "out-of-service-taint-after", 0, "taint a Kubernetes node out of service (node.kubernetes.io/out-of-service) once it has been not ready this long while a worker pod is stranded on it, so Kubernetes deletes its pods and detaches their volumes; needs permission to patch nodes (0: never, the admin decides)")
	flag.BoolVar(&upgradeCRD, "upgrade-crd", false, "before starting, update the served SlurmCluster CRD to the one built into this manager when the served one has a lower slurm.hpc.dev/crd-revision (Helm never upgrades a chart's CRD); a CRD of the same or a higher revision is left alone, and it is never created or deleted; needs get and update on the CRD (the chart sets it and grants them)")
	flag.StringVar(&operatorNS, "operator-namespace", os.Getenv("POD_NAMESPACE"), "the namespace of the operator's own pods (the chart sets POD_NAMESPACE): every cluster's NetworkPolicy lets the pods there with --operator-pod-labels reach slurmrestd; empty (a manager outside the cluster): any pod but the clusters' login and worker pods may")
	flag.StringVar(&operatorLabels, "operator-pod-labels", "", "labels of the operator's own pods, as key=value,key=value (the chart sets them)")
	flag.StringVar(&clusterDomain, "cluster-domain", "cluster.local", "the Kubernetes cluster's DNS domain")
	flag.BoolVar(&local, "local", false, "start a local control plane, install the CRDs and apply --local-sample (the demo)")
	flag.BoolVar(&localOnce, "local-once", false, "with --local: print the demo and exit instead of running until Ctrl-C")
	flag.StringVar(&localSample, "local-sample", "config/samples/slurm_v1alpha1_slurmcluster.yaml", "with --local: the SlurmCluster to apply")
	flag.StringVar(&localCRDs, "local-crds", "config/crd/bases", "with --local: the folder of CRDs to install")
	flag.StringVar(&localConfig, "local-kubeconfig", "bin/demo.kubeconfig", "with --local: where to write the admin kubeconfig")
	flag.StringVar(&localNS, "local-namespace", "fpt-hpc", "with --local: the namespace of the demo cluster")
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

	var cfg *rest.Config
	var plane *localPlane
	if local {
		var err error
		plane, cfg, err = startLocalPlane(localCRDs, localConfig, scheme)
		if err != nil {
			log.Error(err, "start the local control plane")
			os.Exit(1)
		}
		defer func() {
			if err := plane.stop(); err != nil {
				log.Error(err, "stop the local control plane")
			}
		}()
		metricsAddr, probeAddr = "0", "0"
	} else {
		cfg = ctrl.GetConfigOrDie()
	}

	if upgradeCRD {
		if err := ensureCRD(cfg); err != nil {
			log.Error(err, "--upgrade-crd")
			os.Exit(1)
		}
	}

	namespaces, err := parseNamespaces(watchNamespaces)
	if err != nil {
		log.Error(err, "--watch-namespaces")
		os.Exit(2)
	}
	mgr, err := ctrl.NewManager(cfg, managerConfig{
		scheme:        scheme,
		namespaces:    namespaces,
		metricsAddr:   metricsAddr,
		metricsSecure: !metricsInsecure,
		probeAddr:     probeAddr,
		leaderElect:   leaderElect,
	}.options())
	if err != nil {
		log.Error(err, "create manager")
		os.Exit(1)
	}
	podLabels, err := labels.ConvertSelectorToLabelsMap(operatorLabels)
	if err != nil {
		log.Error(err, "--operator-pod-labels")
		os.Exit(1)
	}
	if err := (&controller.SlurmClusterReconciler{
		Client:                    mgr.GetClient(),
		APIReader:                 mgr.GetAPIReader(),
		Scheme:                    mgr.GetScheme(),
		Recorder:                  mgr.GetEventRecorder("slurm-operator"),
		ClusterDomain:             clusterDomain,
		MaxConcurrentReconciles:   maxConcurrent,
		OutOfServiceTaintAfter:    outOfService,
		ExporterTokenLifetime:     tokenLifetime,
		ControlPlanePriorityClass: priorityClass,
		Operator:                  base.OperatorPods{Namespace: operatorNS, PodLabels: podLabels},
		SlurmPollInterval:         slurmPoll,
		StatusSettle:              controller.DefaultStatusSettle,
		Policy:                    policy.Policy{ImagePrefixes: policy.ParseList(imagePrefixes), HostPaths: policy.ParseList(hostPaths)},
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

	ctx, cancel := context.WithCancel(ctrl.SetupSignalHandler())
	defer cancel()
	if local {
		go func() {
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err == nil {
				var sc *slurmv1alpha1.SlurmCluster
				if sc, err = applyDemo(ctx, c, localSample, localNS); err == nil {
					err = plane.showDemo(ctx, c, sc, os.Stdout)
				}
			}
			if err != nil {
				log.Error(err, "demo")
				os.Exit(1)
			}
			if localOnce {
				cancel()
			}
		}()
	}
	log.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "run manager")
		os.Exit(1)
	}
}
