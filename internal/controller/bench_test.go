package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

// BenchmarkReconcileWrites counts API writes per reconcile against a real API server: for the
// first reconcile of the GPU sample (creating everything), for a scale 8 → 16, and for a
// reconcile that finds nothing to change (which must be zero). Run with
// 'make bench' (KUBEBUILDER_ASSETS set).
func BenchmarkReconcileWrites(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("needs KUBEBUILDER_ASSETS (make bench)")
	}
	env, c, _, err := kube.StartEnv([]string{filepath.Join("..", "..", "config", "crd", "bases")})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}
	if err := c.Create(ctx, ns); err != nil {
		b.Fatal(err)
	}
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
	if err != nil {
		b.Fatal(err)
	}
	sc.Namespace = "bench"
	if err := c.Create(ctx, sc); err != nil {
		b.Fatal(err)
	}
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: c.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	var writes atomic.Int64
	r := &controller.SlurmClusterReconciler{Client: countingClient(direct, &writes), APIReader: direct, Scheme: c.Scheme()}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(sc)}
	run := func() int64 {
		writes.Store(0)
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
		return writes.Load()
	}
	create := run()
	settle := run()
	cur := &slurmv1alpha1.SlurmCluster{}
	if err := c.Get(ctx, req.NamespacedName, cur); err != nil {
		b.Fatal(err)
	}
	cur.Spec.SlurmNodes.Worker.Size = 16
	if err := c.Update(ctx, cur); err != nil {
		b.Fatal(err)
	}
	scale := run()
	run() // status settles after the scale
	var noop int64
	b.ResetTimer()
	for b.Loop() {
		noop += run()
	}
	b.ReportMetric(float64(create), "writes-create")
	b.ReportMetric(float64(settle), "writes-second")
	b.ReportMetric(float64(scale), "writes-scale")
	b.ReportMetric(float64(noop)/float64(b.N), "writes/noop")
}
