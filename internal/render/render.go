// Package render turns a SlurmCluster and the facts the controller observed (keys, GPU shape,
// database, optional APIs) into the Kubernetes objects of a Slurm cluster. It is pure: no API
// calls, no randomness, no clock; the same Input gives the same objects, byte for byte.
// Each component lives in its own package; this package only assembles them in apply order.
package render

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/accounting"
	"github.com/slurm-k8s/slurm-operator/internal/render/backup"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/exporter"
	"github.com/slurm-k8s/slurm-operator/internal/render/jail"
	"github.com/slurm-k8s/slurm-operator/internal/render/login"
	"github.com/slurm-k8s/slurm-operator/internal/render/netpol"
	"github.com/slurm-k8s/slurm-operator/internal/render/nodedns"
	"github.com/slurm-k8s/slurm-operator/internal/render/shared"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmctld"
	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
)

// Part is the objects of one component, in apply order.
type Part struct {
	Component slurmv1alpha1.Component
	Objects   []client.Object
}

// SharedComponent names the objects every component uses (keys, config).
const SharedComponent slurmv1alpha1.Component = "shared"

// NodeNamesComponent names the objects that give the Slurm node names DNS names (nodedns).
const NodeNamesComponent = slurmv1alpha1.ComponentNodeNames

// All renders every object of the cluster, grouped by component, in apply order. Optional
// objects whose API the cluster does not serve (mariadb-operator, ServiceMonitor) are left out;
// the controller reports that in the status.
func All(in base.Input) ([]Part, error) {
	if in.ClusterDomain == "" {
		in.ClusterDomain = base.DefaultClusterDomain
	}
	sc := in.Cluster
	if err := base.CheckHostKeys(in.Keys.SSHHost); err != nil {
		return nil, err
	}
	if err := slurmconf.CheckTopology(sc); err != nil {
		return nil, err
	}
	if err := slurmconf.CheckNodeSetResources(sc); err != nil {
		return nil, err
	}
	parts := []Part{{Component: SharedComponent, Objects: []client.Object{
		shared.MungeKeySecret(in),
		shared.JWTKeySecret(in),
		shared.SSHHostKeysSecret(in),
		shared.SlurmConfigMap(in),
	}}}
	if cm := shared.IdentityConfigMap(in); cm != nil {
		parts[0].Objects = append(parts[0].Objects, cm)
	}

	ctl, err := slurmctld.StatefulSet(in)
	if err != nil {
		return nil, fmt.Errorf("render controller statefulset: %w", err)
	}
	pols := sc.NetworkPoliciesEnabled()
	// withPolicy adds a component's NetworkPolicy, first: its pods start behind it.
	withPolicy := func(p func(base.Input) *networkingv1.NetworkPolicy, objs ...client.Object) []client.Object {
		if !pols {
			return objs
		}
		return append([]client.Object{p(in)}, objs...)
	}
	parts = append(parts, Part{Component: slurmv1alpha1.ComponentController, Objects: withPolicy(netpol.Controller, slurmctld.Service(in), ctl)})

	sets, err := worker.StatefulSets(in)
	if err != nil {
		return nil, fmt.Errorf("render worker statefulset: %w", err)
	}
	wrk := []client.Object{worker.Service(in)}
	for _, sts := range sets {
		wrk = append(wrk, sts)
	}
	wrk = append(wrk, worker.BusyPodDisruptionBudget(in))
	parts = append(parts, Part{Component: slurmv1alpha1.ComponentWorker, Objects: withPolicy(netpol.Worker, wrk...)})

	lgn, err := login.StatefulSet(in)
	if err != nil {
		return nil, fmt.Errorf("render login statefulset: %w", err)
	}
	parts = append(parts, Part{Component: slurmv1alpha1.ComponentLogin, Objects: withPolicy(netpol.Login,
		login.AuthorizedKeysConfigMap(in), login.HeadlessService(in), login.Service(in), lgn,
	)})

	job, err := jail.Job(in)
	if err != nil {
		return nil, fmt.Errorf("render populate job: %w", err)
	}
	if job != nil {
		parts = append(parts, Part{Component: slurmv1alpha1.ComponentJail, Objects: []client.Object{job}})
	}

	// Without a database password (the user's Secret is missing or unusable) the accounting
	// objects are left out of this render; slurm.conf still points at slurmdbd, and the
	// controller keeps the accounting objects that exist.
	if acc := sc.Spec.SlurmNodes.Accounting; acc.Enabled && in.Database.Password != "" {
		objs := withPolicy(netpol.Accounting)
		if acc.MariadbOperator != nil && acc.MariadbOperator.Enabled {
			objs = append(objs, accounting.PasswordSecret(in))
			if in.Optional.MariaDB {
				objs = withPolicy(netpol.MariaDB, objs...)
				mdb, err := accounting.MariaDBObjects(in)
				if err != nil {
					return nil, fmt.Errorf("render mariadb objects: %w", err)
				}
				for _, o := range mdb {
					objs = append(objs, o)
				}
			}
		}
		objs = append(objs, accounting.ConfigSecret(in), accounting.Service(in), accounting.StatefulSet(in))
		parts = append(parts, Part{Component: slurmv1alpha1.ComponentAccounting, Objects: objs})
	}

	if exp := sc.Spec.SlurmNodes.Exporter; exp.Enabled {
		objs := withPolicy(netpol.Exporter, exporter.TokenSecret(in), exporter.Service(in), exporter.Deployment(in))
		if in.Optional.ServiceMonitor {
			objs = append(objs, exporter.ServiceMonitor(in))
		}
		parts = append(parts, Part{Component: slurmv1alpha1.ComponentExporter, Objects: objs})
	}
	cj, err := backup.CronJob(sc)
	if err != nil {
		return nil, err
	}
	if cj != nil {
		parts = append(parts, Part{Component: slurmv1alpha1.ComponentBackup, Objects: []client.Object{cj}})
	}
	// Last: the node names matter once pods have addresses, and a new cluster's StatefulSets
	// come first. The controller leaves them out until a pod has an address.
	parts = append(parts, Part{Component: NodeNamesComponent, Objects: []client.Object{nodedns.Service(in), nodedns.EndpointSlice(in)}})
	return parts, nil
}
