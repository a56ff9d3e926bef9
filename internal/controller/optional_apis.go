package controller

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// The optional APIs a cluster may serve, and the kind the operator renders of each.
var (
	mariaDBKind        = schema.GroupVersionKind{Group: "k8s.mariadb.com", Version: "v1alpha1", Kind: "MariaDB"}
	serviceMonitorKind = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
)

// DefaultOptionalAPIInterval is how often the operator asks discovery whether an optional API
// (mariadb-operator, the Prometheus operator) was installed or removed.
const DefaultOptionalAPIInterval = time.Minute

// optionalAPIWatcher knows which optional APIs the cluster serves. It asks discovery when it
// starts and then every interval, with one GET of the API group list (and one more per optional
// group that is listed), whatever the number of SlurmClusters; reconciles read its answer from
// memory. When the answer changes, every SlurmCluster is reconciled again: a ServiceMonitor
// appears once the Prometheus operator is installed, without touching the SlurmCluster.
type optionalAPIWatcher struct {
	discovery discovery.DiscoveryInterface
	interval  time.Duration
	changed   chan event.GenericEvent

	mu    sync.Mutex
	known bool
	apis  base.OptionalAPIs
}

func newOptionalAPIWatcher(d discovery.DiscoveryInterface, interval time.Duration) *optionalAPIWatcher {
	if interval <= 0 {
		interval = DefaultOptionalAPIInterval
	}
	return &optionalAPIWatcher{discovery: d, interval: interval, changed: make(chan event.GenericEvent, 1)}
}

// get returns the last answer, asking discovery first when there is none yet.
func (w *optionalAPIWatcher) get(ctx context.Context) (base.OptionalAPIs, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.known {
		return w.apis, nil
	}
	apis, err := w.ask(ctx)
	if err != nil {
		return base.OptionalAPIs{}, err
	}
	w.apis, w.known = apis, true
	return apis, nil
}

// Start refreshes the answer every interval until ctx ends (a manager Runnable).
func (w *optionalAPIWatcher) Start(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		apis, err := w.ask(ctx)
		if err != nil {
			log.FromContext(ctx).V(1).Info("optional API discovery failed; keeping the last answer", "error", err.Error())
			continue
		}
		w.mu.Lock()
		changed := w.known && apis != w.apis
		w.apis, w.known = apis, true
		w.mu.Unlock()
		if changed {
			log.FromContext(ctx).Info("optional APIs changed", "mariadb", apis.MariaDB, "serviceMonitor", apis.ServiceMonitor)
			select {
			case w.changed <- event.GenericEvent{Object: &slurmv1alpha1.SlurmCluster{}}:
			default: // a wake-up is already pending
			}
		}
	}
}

// NeedLeaderElection: every replica keeps its own answer, so a new leader starts informed.
func (w *optionalAPIWatcher) NeedLeaderElection() bool { return false }

// ask asks discovery: the group list, then the resources of each optional group it lists.
func (w *optionalAPIWatcher) ask(ctx context.Context) (base.OptionalAPIs, error) {
	groups := &metav1.APIGroupList{}
	if err := w.discovery.RESTClient().Get().AbsPath("/apis").Do(ctx).Into(groups); err != nil {
		return base.OptionalAPIs{}, err
	}
	served := func(gvk schema.GroupVersionKind) (bool, error) {
		listed := false
		for _, g := range groups.Groups {
			for _, v := range g.Versions {
				listed = listed || (g.Name == gvk.Group && v.Version == gvk.Version)
			}
		}
		if !listed {
			return false, nil
		}
		res, err := w.discovery.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		if err != nil {
			return false, err
		}
		for _, r := range res.APIResources {
			if r.Kind == gvk.Kind {
				return true, nil
			}
		}
		return false, nil
	}
	var apis base.OptionalAPIs
	var err error
	if apis.MariaDB, err = served(mariaDBKind); err != nil {
		return apis, err
	}
	if apis.ServiceMonitor, err = served(serviceMonitorKind); err != nil {
		return apis, err
	}
	return apis, nil
}
