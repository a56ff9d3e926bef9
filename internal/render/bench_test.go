package render_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/slurm-k8s/slurm-operator/internal/render"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
)

// BenchmarkRenderAll renders every object of the GPU sample at several worker counts, and
// reports the size of the Slurm ConfigMap: it must not grow with the worker count.
func BenchmarkRenderAll(b *testing.B) {
	for _, workers := range []int32{8, 128, 1024, 4096} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
			if err != nil {
				b.Fatal(err)
			}
			sc.Spec.SlurmNodes.Worker.Size = workers
			in := fixtures.Input(sc)
			var configBytes int
			b.ReportAllocs()
			for b.Loop() {
				parts, err := render.All(in)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range parts[0].Objects {
					if cm, ok := o.(*corev1.ConfigMap); ok {
						configBytes = 0
						for _, v := range cm.Data {
							configBytes += len(v)
						}
					}
				}
			}
			b.ReportMetric(float64(configBytes), "config-bytes")
		})
	}
}
