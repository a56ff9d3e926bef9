package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

func TestMaxUnavailableIsTheSpecsNumberOrShareOfTheSizeAndAtLeastOne(t *testing.T) {
	for _, tc := range []struct {
		size int32
		max  *intstr.IntOrString
		want int
	}{
		{size: 3, want: 1},  // a tenth of 3, rounded down, but at least one
		{size: 40, want: 4}, // a tenth
		{size: 40, max: ptrTo(intstr.FromInt32(6)), want: 6},
		{size: 40, max: ptrTo(intstr.FromString("25%")), want: 10},
		{size: 3, max: ptrTo(intstr.FromString("50%")), want: 1},
		{size: 3, max: ptrTo(intstr.FromString("100%")), want: 3},
		{size: 0, max: ptrTo(intstr.FromString("50%")), want: 1},
	} {
		w := slurmv1alpha1.Worker{Size: tc.size}
		w.UpdateStrategy.MaxUnavailable = tc.max
		if got := maxUnavailable(w); got != tc.want {
			t.Errorf("size %d, maxUnavailable %v: %d, want %d", tc.size, tc.max, got, tc.want)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
