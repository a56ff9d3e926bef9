package controller

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// A status write waits, a bounded time, for a StatefulSet the operator just changed to report.
func TestTheStatusWaitsForAStatefulSetTheOperatorJustChanged(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 10, 0, time.UTC)
	changed := func(applied time.Time, generation, observed int64) *appsv1.StatefulSet {
		s := sts(16, 8)
		s.Generation, s.Status.ObservedGeneration = generation, observed
		s.ManagedFields = []metav1.ManagedFieldsEntry{
			{Manager: base.ManagedBy, Time: &metav1.Time{Time: applied}},
			{Manager: "kube-controller-manager", Subresource: "status", Time: &metav1.Time{Time: now}},
		}
		return s
	}
	r := &SlurmClusterReconciler{StatusSettle: 3 * time.Second}
	for _, tc := range []struct {
		name string
		o    observed
		wait bool
	}{
		{"applied this second, not reported", observed{worker: changed(now, 2, 1)}, true},
		{"applied, and reported", observed{worker: changed(now, 2, 2)}, false},
		{"applied, reported, pods still being made", observed{worker: func() *appsv1.StatefulSet {
			s := changed(now, 2, 2)
			s.Status.Replicas = 9
			return s
		}()}, true},
		{"applied long ago, never reported (no StatefulSet controller)", observed{worker: changed(now.Add(-time.Minute), 2, 1)}, false},
		{"not reported, but an apply failed", observed{worker: changed(now, 2, 1), applyErrs: []string{"x"}}, false},
		{"not reported, but a phase failed", observed{worker: changed(now, 2, 1), phaseErr: errors.New("x")}, false},
		{"nothing changed", observed{controller: changed(now.Add(-time.Hour), 1, 1)}, false},
	} {
		wait := r.statusSettling(&tc.o, now)
		if (wait > 0) != tc.wait || wait > r.StatusSettle+time.Second {
			t.Errorf("%s: waits %s", tc.name, wait)
		}
	}
	if wait := (&SlurmClusterReconciler{}).statusSettling(&observed{worker: changed(now, 2, 1)}, now); wait != 0 {
		t.Errorf("StatusSettle 0 must write at once, waits %s", wait)
	}
}
