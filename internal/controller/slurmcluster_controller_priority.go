package controller

import (
	"context"
	"fmt"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// controlPlanePriorityClass is the PriorityClass to give the control-plane pods: the manager's
// --control-plane-priority-class when it exists. A class that does not exist would make the API
// server refuse every slurmctld, slurmdbd and MariaDB pod, so the pods then get none and the
// second result says why (Degraded, PriorityClassMissing) until the class is made. It is read
// from the API server, not a cache: one GET per reconcile, and no cluster-wide watch.
func (r *SlurmClusterReconciler) controlPlanePriorityClass(ctx context.Context) (string, string, error) {
	name := r.ControlPlanePriorityClass
	if name == "" {
		return "", "", nil
	}
	reader := client.Reader(r.APIReader)
	if reader == nil {
		reader = r.Client
	}
	err := reader.Get(ctx, types.NamespacedName{Name: name}, &schedulingv1.PriorityClass{})
	switch {
	case err == nil:
		return name, "", nil
	case apierrors.IsNotFound(err):
		return "", fmt.Sprintf("the PriorityClass %s (the manager's --control-plane-priority-class, the operator chart's priorityClass.name) does not exist: slurmctld, slurmdbd and MariaDB run without a priority until it does; create it, or install the operator chart with priorityClass.create", name), nil
	case apierrors.IsForbidden(err):
		return "", fmt.Sprintf("the manager may not read the PriorityClass %s (it needs get on priorityclasses, which the operator chart grants): slurmctld, slurmdbd and MariaDB run without a priority", name), nil
	}
	return "", "", fmt.Errorf("read the PriorityClass %s: %w", name, err)
}
