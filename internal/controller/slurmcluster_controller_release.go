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
	// set is the node set whose StatefulSet runs it; empty: the component's StatefulSet.
	set string
}

// statefulSet is the name of the StatefulSet that runs the image.
func (im slurmImage) statefulSet(c *slurmv1alpha1.SlurmCluster) string {
	if im.set != "" {
		return c.WorkerSetStatefulSetName(im.set)
	}
	return c.ComponentName(im.component)
}

func slurmImages(c *slurmv1alpha1.SlurmCluster) []slurmImage {
	out := []slurmImage{
		{"spec.images.controller", c.Spec.Images.Controller, slurmv1alpha1.ComponentController, "slurmctld", ""},
		{"spec.images.worker", c.Spec.Images.Worker, slurmv1alpha1.ComponentWorker, "slurmd", ""},
		{"spec.images.login", c.Spec.Images.Login, slurmv1alpha1.ComponentLogin, "sshd", ""},
	}
	for i, ns := range c.Spec.SlurmNodes.NodeSets {
		if ns.Image != "" {
			out = append(out, slurmImage{fmt.Sprintf("spec.slurmNodes.nodeSets[%d].image", i), ns.Image, slurmv1alpha1.ComponentWorker, "slurmd", ns.Name})
		}
	}
	if c.Spec.SlurmNodes.Accounting.Enabled {
		out = append(out, slurmImage{"spec.images.accounting", c.Spec.Images.Accounting, slurmv1alpha1.ComponentAccounting, "slurmdbd", ""})
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
	if err != nil {
		return err
	}
	return r.stageSlurmUpgrade(ctx, s)
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
		found, err := r.getOptional(ctx, types.NamespacedName{Namespace: c.Namespace, Name: im.statefulSet(c)}, &sts)
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

// liveSlurm is what one StatefulSet of Slurm runs now.
type liveSlurm struct {
	found   bool
	image   string
	release slurmfacts.Release
	known   bool
	// settled: every pod runs the StatefulSet's current template and is ready.
	settled bool
}

func (r *SlurmClusterReconciler) liveSlurm(ctx context.Context, c *slurmv1alpha1.SlurmCluster, im slurmImage) (liveSlurm, error) {
	var sts appsv1.StatefulSet
	found, err := r.getOptional(ctx, types.NamespacedName{Namespace: c.Namespace, Name: im.statefulSet(c)}, &sts)
	if err != nil || !found {
		return liveSlurm{}, err
	}
	l := liveSlurm{found: true}
	for _, ctr := range sts.Spec.Template.Spec.Containers {
		if ctr.Name == im.container {
			l.image = ctr.Image
			l.release, l.known = slurmfacts.ImageRelease(ctr.Image)
		}
	}
	want := int32(1)
	if sts.Spec.Replicas != nil {
		want = *sts.Spec.Replicas
	}
	st := sts.Status
	l.settled = st.ObservedGeneration >= sts.Generation && st.UpdatedReplicas == want && st.ReadyReplicas == want
	return l, nil
}

// stageSlurmUpgrade orders a change of Slurm release as Slurm's upgrade guide does: slurmdbd
// first, then slurmctld, then the workers and login nodes. While an earlier stage's
// StatefulSet does not yet run the new release on every pod, ready, the later stages' images
// stay the ones they run (in this reconcile's copy of the spec, which renders), and
// SlurmUpgrading says what is waited for. A change within one release is not staged.
func (r *SlurmClusterReconciler) stageSlurmUpgrade(ctx context.Context, s *reconcileScope) error {
	c := s.desired
	images := slurmImages(c)
	live := map[string]liveSlurm{}
	for _, im := range images {
		l, err := r.liveSlurm(ctx, c, im)
		if err != nil {
			return err
		}
		live[im.field] = l
	}
	// changes says whether the field asks for another release than its StatefulSet runs.
	changes := func(im slurmImage) bool {
		l := live[im.field]
		want, ok := slurmfacts.ImageRelease(im.image)
		return l.found && l.known && ok && want != l.release
	}
	// pending says why a stage is not done: its release is not rolled out and ready everywhere.
	pending := func(im slurmImage) string {
		l := live[im.field]
		switch {
		case !l.found:
			return ""
		case changes(im):
			want, _ := slurmfacts.ImageRelease(im.image)
			return fmt.Sprintf("%s to go from Slurm %s to %s", im.component, l.release, want)
		case !l.settled:
			return fmt.Sprintf("every %s pod to run %s and be ready", im.component, im.image)
		}
		return ""
	}
	stages := [][]string{{"spec.images.accounting"}, {"spec.images.controller"}, {"spec.images.worker", "spec.images.login"}}
	byField := map[string]slurmImage{}
	for _, im := range images {
		byField[im.field] = im
	}
	s.facts.upgradeDecided = true
	s.facts.upgrade = slurmUpgrade{}
	// The backup Jobs are the record that a backup was taken: never pruned.
	s.keep = append(s.keep, slurmv1alpha1.ComponentUpgradeBackup)
	why, reason, err := r.backupHold(ctx, s, live, changes)
	if err != nil {
		return err
	}
	if why != "" {
		// Before the backup, nothing of the new release rolls.
		var held []string
		for _, im := range images {
			if changes(im) {
				setImage(c, im.field, live[im.field].image)
				held = append(held, fmt.Sprintf("%s stays %s", im.field, live[im.field].image))
			}
		}
		s.facts.upgrade = slurmUpgrade{active: true, reason: reason, message: why + ": " + strings.Join(held, ", ")}
		return nil
	}
	var waitFor string
	var held []string
	for i, stage := range stages {
		for _, f := range stage {
			im, ok := byField[f]
			if !ok {
				continue
			}
			if waitFor != "" {
				if changes(im) {
					setImage(c, f, live[f].image)
					held = append(held, fmt.Sprintf("%s stays %s", f, live[f].image))
				}
				continue
			}
			if why := pending(im); why != "" && laterChanges(stages[i+1:], byField, changes) {
				waitFor, reason = why, stageReason[i]
			}
		}
	}
	if len(held) > 0 {
		s.facts.upgrade = slurmUpgrade{active: true, reason: reason,
			message: fmt.Sprintf("waiting for %s: %s", waitFor, strings.Join(held, ", "))}
	}
	return nil
}

// stageReason is SlurmUpgrading's reason while a stage holds the later ones.
var stageReason = []string{slurmv1alpha1.ReasonWaitingForAccounting, slurmv1alpha1.ReasonWaitingForController, ""}

func laterChanges(stages [][]string, byField map[string]slurmImage, changes func(slurmImage) bool) bool {
	for _, stage := range stages {
		for _, f := range stage {
			if im, ok := byField[f]; ok && changes(im) {
				return true
			}
		}
	}
	return false
}

// slurmUpgrade is what SlurmUpgrading says.
type slurmUpgrade struct {
	active          bool
	reason, message string
}

func setImage(c *slurmv1alpha1.SlurmCluster, field, image string) {
	switch field {
	case "spec.images.controller":
		c.Spec.Images.Controller = image
	case "spec.images.worker":
		c.Spec.Images.Worker = image
	case "spec.images.login":
		c.Spec.Images.Login = image
	case "spec.images.accounting":
		c.Spec.Images.Accounting = image
	}
}
