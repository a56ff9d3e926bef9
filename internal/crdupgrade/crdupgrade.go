// Package crdupgrade keeps the served SlurmCluster CRD at the schema this manager was built
// with. Helm installs a chart's crds/ folder once and never upgrades it, so after an operator
// upgrade the API server would still serve the old schema and silently drop every new field of
// a spec. The manager (with --upgrade-crd, which the chart sets) replaces the served CRD's spec
// with its own when its revision is higher, and leaves a CRD of the same or a higher revision
// alone: an older manager (a rollback, a pod of the previous release still running during a
// rolling update) never takes fields away, which the API server would then prune from every
// stored object at its next write. It never creates or deletes the CRD.
package crdupgrade

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const (
	// RevisionAnnotation numbers the generated CRD: one more whenever make manifests writes a
	// different CRD (hack/crdrevision).
	RevisionAnnotation = "slurm.hpc.dev/crd-revision"
	// DigestAnnotation is the SHA-256 of the CRD controller-gen wrote, so that make manifests
	// knows when to count up.
	DigestAnnotation = "slurm.hpc.dev/crd-digest"
)

// Parse reads a CRD manifest.
func Parse(data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("read the CRD: %w", err)
	}
	if crd.Name == "" {
		return nil, fmt.Errorf("read the CRD: no metadata.name")
	}
	return crd, nil
}

// Revision is the CRD's revision: 0 for a CRD without the annotation (charts before it).
func Revision(crd *apiextensionsv1.CustomResourceDefinition) (int, error) {
	v, ok := crd.Annotations[RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("CRD %s: annotation %s=%q is not a revision number", crd.Name, RevisionAnnotation, v)
	}
	return n, nil
}

// Outcome says what Ensure found and did.
type Outcome struct {
	Name            string
	Served, Shipped int
	Updated         bool
}

func (o Outcome) String() string {
	switch {
	case o.Updated:
		return fmt.Sprintf("CRD %s updated from revision %d to %d", o.Name, o.Served, o.Shipped)
	case o.Served > o.Shipped:
		return fmt.Sprintf("CRD %s left at revision %d, newer than this manager's %d", o.Name, o.Served, o.Shipped)
	default:
		return fmt.Sprintf("CRD %s is at this manager's revision %d", o.Name, o.Shipped)
	}
}

// Ensure brings the served CRD named like want to want's schema when want's revision is higher,
// and waits until the API server serves it (Established). c must read from the API server, not
// from a cache. The served CRD's other annotations and labels are kept; its spec becomes want's
// whole, so a field the new schema dropped does not linger under another field manager.
func Ensure(ctx context.Context, c client.Client, want *apiextensionsv1.CustomResourceDefinition) (Outcome, error) {
	o := Outcome{Name: want.Name}
	shipped, err := Revision(want)
	if err != nil {
		return o, err
	}
	o.Shipped = shipped
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		served := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: want.Name}, served); err != nil {
			return err
		}
		if o.Served, err = Revision(served); err != nil {
			return err
		}
		if o.Served >= o.Shipped {
			return nil
		}
		served.Spec = *want.Spec.DeepCopy()
		if served.Annotations == nil {
			served.Annotations = map[string]string{}
		}
		for k, v := range want.Annotations {
			served.Annotations[k] = v
		}
		for k, v := range want.Labels {
			if served.Labels == nil {
				served.Labels = map[string]string{}
			}
			served.Labels[k] = v
		}
		if err := c.Update(ctx, served); err != nil {
			return err
		}
		o.Updated = true
		return nil
	})
	switch {
	case apierrors.IsNotFound(err):
		return o, fmt.Errorf("the CRD %s is not installed: install it with the operator chart (not --skip-crds) or kubectl apply -k config/default; the manager updates the CRD but never creates it", want.Name)
	case apierrors.IsForbidden(err):
		return o, fmt.Errorf("the manager may not update the CRD %s (the operator chart's ClusterRole RELEASE-crd grants get and update on it; or run the manager with --upgrade-crd=false and apply the CRD yourself): %w", want.Name, err)
	case err != nil:
		return o, fmt.Errorf("update the CRD %s: %w", want.Name, err)
	case !o.Updated:
		return o, nil
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		served := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: want.Name}, served); err != nil {
			return false, err
		}
		for _, cond := range served.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return o, fmt.Errorf("CRD %s updated to revision %d but not established: %w", want.Name, o.Shipped, err)
	}
	return o, nil
}
