package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// slurmImage is one image of the spec that carries Slurm: its field, the StatefulSet that runs
// it and the container there.
type slurmImage struct {
	field     string
	image     string
	component slurmv1alpha1.Component
	container string
}

func slurmImages(c *slurmv1alpha1.SlurmCluster) []slurmImage {
	out := []slurmImage{
		{"spec.images.controller", c.Spec.Images.Controller, slurmv1alpha1.ComponentController, "slurmctld"},
		{"spec.images.worker", c.Spec.Images.Worker, slurmv1alpha1.ComponentWorker, "slurmd"},
		{"spec.images.login", c.Spec.Images.Login, slurmv1alpha1.ComponentLogin, "sshd"},
	}
	if c.Spec.SlurmNodes.Accounting.Enabled {
		out = append(out, slurmImage{"spec.images.accounting", c.Spec.Images.Accounting, slurmv1alpha1.ComponentAccounting, "slurmdbd"})
	}
	return out
}

// checkSlurmRelease halts, before anything is rendered, images whose Slurm releases cannot run
// together or cannot follow what runs now: the releases are read from the images' tags, and an
// image whose tag names none is not checked. Refused: slurmdbd older than slurmctld, slurmctld
// older than a worker or login node (Slurm's daemons talk only to clients of their release or
// older), and, against each running StatefulSet's image, a downgrade or a jump over more releases
// than Slurm upgrades over. Nothing is rolled; the status names the field and both releases.
func (r *SlurmClusterReconciler) checkSlurmRelease(ctx context.Context, s *reconcileScope) error {
	err := r.slurmReleaseProblem(ctx, s.desired)
	var refused *releaseRefused
	if errors.As(err, &refused) {
		s.facts.renderErr, s.facts.renderReason = err, slurmv1alpha1.ReasonSlurmReleaseRefused
		return errHalt
	}
	return err
}

type releaseRefused struct{ msg string }

func (e *releaseRefused) Error() string { return e.msg }

func (r *SlurmClusterReconciler) slurmReleaseProblem(ctx context.Context, c *slurmv1alpha1.SlurmCluster) error {
	images := slurmImages(c)
	rel := map[string]slurmfacts.Release{}
	for _, im := range images {
		if v, ok := slurmfacts.ImageRelease(im.image); ok {
			rel[im.field] = v
		}
	}
	// The daemons together: slurmdbd >= slurmctld >= slurmd and the client commands.
	order := []struct{ newer, older string }{
		{"spec.images.accounting", "spec.images.controller"},
		{"spec.images.controller", "spec.images.worker"},
		{"spec.images.controller", "spec.images.login"},
	}
	for _, o := range order {
		n, okN := rel[o.newer]
		v, okV := rel[o.older]
		if okN && okV && n.Compare(v) < 0 {
			return &releaseRefused{fmt.Sprintf("%s is Slurm %s, older than %s's %s: %s", o.newer, n, o.older, v,
				"slurmdbd must be at least slurmctld's release, and slurmctld at least the workers' and login nodes'")}
		}
	}
	// Each against what runs.
	var problems []string
	for _, im := range images {
		want, ok := rel[im.field]
		if !ok {
			continue
		}
		var sts appsv1.StatefulSet
		found, err := r.getOptional(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.ComponentName(im.component)}, &sts)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		running, ok := containerRelease(&sts, im.container)
		if !ok {
			continue
		}
		if err := slurmfacts.CheckUpgrade(running, want); err != nil {
			problems = append(problems, fmt.Sprintf("%s (%s, running %s): %v", im.field, im.image, running, err))
		}
	}
	if len(problems) > 0 {
		return &releaseRefused{strings.Join(problems, "; ") + "; nothing is rolled until the images are set back"}
	}
	return nil
}

// containerRelease is the release of the named container's image in a StatefulSet's template.
func containerRelease(sts *appsv1.StatefulSet, name string) (slurmfacts.Release, bool) {
	for _, ctr := range sts.Spec.Template.Spec.Containers {
		if ctr.Name == name {
			return slurmfacts.ImageRelease(ctr.Image)
		}
	}
	return slurmfacts.Release{}, false
}
