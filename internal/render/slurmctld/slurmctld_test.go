package slurmctld_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmctld"
)

func TestSlurmrestdIsSizedForTheClustersWorkers(t *testing.T) {
	for _, c := range []struct {
		workers                   int32
		cpu, memRequest, memLimit string
	}{
		{workers: 8, cpu: "108m", memRequest: "176Mi", memLimit: "1120Mi"},    // sized for 16
		{workers: 128, cpu: "164m", memRequest: "512Mi", memLimit: "1792Mi"},  // a step itself
		{workers: 1024, cpu: "612m", memRequest: "3200Mi", memLimit: "7Gi"},   // a step itself
		{workers: 1000, cpu: "612m", memRequest: "3200Mi", memLimit: "7Gi"},   // the size measured
		{workers: 0, cpu: "108m", memRequest: "176Mi", memLimit: "1120Mi"},    // no workers yet
		{workers: 1025, cpu: "1124m", memRequest: "6272Mi", memLimit: "13Gi"}, // the next step
	} {
		r := slurmctld.RestdResources(c.workers)
		for _, q := range []struct {
			what, want string
			got        resource.Quantity
		}{
			{"CPU request", c.cpu, r.Requests[corev1.ResourceCPU]},
			{"memory request", c.memRequest, r.Requests[corev1.ResourceMemory]},
			{"memory limit", c.memLimit, r.Limits[corev1.ResourceMemory]},
		} {
			if q.got.Cmp(resource.MustParse(q.want)) != 0 {
				t.Errorf("%d workers: %s %s, want %s", c.workers, q.what, q.got.String(), q.want)
			}
		}
		if _, ok := r.Limits[corev1.ResourceCPU]; ok {
			t.Errorf("%d workers: a CPU limit would throttle long job lists past their clients' timeouts", c.workers)
		}
	}
	// The figure the formula is built on: 2,865 MiB at 1,000 nodes and 10,000 jobs. The
	// request holds it (slurmrestd keeps what a list left) and the limit leaves room above it.
	measured := resource.MustParse("2865Mi")
	r := slurmctld.RestdResources(1000)
	if req, lim := r.Requests[corev1.ResourceMemory], r.Limits[corev1.ResourceMemory]; req.Cmp(measured) < 0 || lim.Cmp(measured) <= 0 {
		t.Errorf("1,000 workers: request %s and limit %s do not hold the measured peak %s", req.String(), lim.String(), measured.String())
	}
}

// The memory limit isolates slurmctld only because slurmrestd is a container of its own, and
// slurmctld's resources stay the spec's.
func TestSlurmrestdHasItsOwnContainerAndLimit(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
	if err != nil {
		t.Fatal(err)
	}
	in := fixtures.Input(sc)
	sts, err := slurmctld.StatefulSet(in)
	if err != nil {
		t.Fatal(err)
	}
	containers := map[string]corev1.Container{}
	for _, c := range sts.Spec.Template.Spec.Containers {
		containers[c.Name] = c
	}
	restd, ok := containers["slurmrestd"]
	if !ok {
		t.Fatal("no slurmrestd container")
	}
	ctld, ok := containers["slurmctld"]
	if !ok {
		t.Fatal("no slurmctld container")
	}
	if !equality.Semantic.DeepEqual(restd.Resources, slurmctld.RestdResources(in.WorkerCount())) {
		t.Errorf("slurmrestd's resources are %v", restd.Resources)
	}
	if !equality.Semantic.DeepEqual(ctld.Resources, in.Cluster.Spec.SlurmNodes.Controller.Resources.Core()) {
		t.Errorf("slurmctld's resources are %v, the spec asks for %v", ctld.Resources, in.Cluster.Spec.SlurmNodes.Controller.Resources)
	}
}

// Scaling within a step leaves the controller's pod template alone, so slurmctld is not
// restarted by a scale within a step (8 → 16 workers, as the envtest suite scales); crossing a
// step changes it.
func TestScalingWithinAStepLeavesTheControllerPodTemplateAlone(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
	if err != nil {
		t.Fatal(err)
	}
	template := func(workers int32) corev1.PodTemplateSpec {
		in := fixtures.Input(sc)
		in.Workers = &workers
		sts, err := slurmctld.StatefulSet(in)
		if err != nil {
			t.Fatal(err)
		}
		return sts.Spec.Template
	}
	for _, scale := range [][2]int32{{8, 16}, {17, 32}, {600, 1000}} {
		if !equality.Semantic.DeepEqual(template(scale[0]), template(scale[1])) {
			t.Errorf("scaling %d → %d workers changes the controller's pod template", scale[0], scale[1])
		}
	}
	if equality.Semantic.DeepEqual(template(16), template(17)) {
		t.Error("16 → 17 workers crosses a step and should size slurmrestd for 32")
	}
}
