package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/kube"
)

// BenchmarkReconcileWrites counts API writes per reconcile against a real API server: for the
// first reconcile of the GPU sample (creating everything), for a scale 8 → 16, and for a
// reconcile that finds nothing to change (which must be zero). Run with
// 'make bench' (KUBEBUILDER_ASSETS set).
func BenchmarkReconcileWrites(b *testing.B) {
	ctx := context.Background()
	c, direct := benchAPIServer(b)
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
	if err != nil {
		b.Fatal(err)
	}
	sc.Namespace = "bench"
	if err := c.Create(ctx, sc); err != nil {
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

// scriptedSlurm answers the elastic benchmark's node states, which the benchmark sets step by
// step as slurmctld would: the benchmark counts Kubernetes writes, and the node states are its
// input (the controller suite runs the same path against a real slurmctld).
type scriptedSlurm struct {
	mu    sync.Mutex
	nodes []slurm.Node
	power []string
}

func (s *scriptedSlurm) set(state ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	busy := slurm.Number{Set: true, Number: time.Now().Add(-time.Hour).Unix()}
	s.nodes = []slurm.Node{
		{Name: "worker-0", State: state, LastBusy: busy},
		{Name: "worker-1", State: state, LastBusy: busy},
	}
}

func (s *scriptedSlurm) Nodes(context.Context) ([]slurm.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]slurm.Node(nil), s.nodes...), nil
}
func (s *scriptedSlurm) SetPower(_ context.Context, name string, up bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.power = append(s.power, fmt.Sprintf("%s up=%v", name, up))
	return nil
}
func (s *scriptedSlurm) Drain(context.Context, string, string) error         { return nil }
func (s *scriptedSlurm) ResumeIfOwned(context.Context, string) (bool, error) { return false, nil }
func (s *scriptedSlurm) SetAddress(context.Context, string, string) error    { return nil }
func (s *scriptedSlurm) SetNodeComment(context.Context, string, string) error {
	return nil
}
func (s *scriptedSlurm) SetJobAdminComment(context.Context, int64, string) error { return nil }
func (s *scriptedSlurm) Jobs(context.Context) ([]slurm.Job, error)               { return nil, nil }

// BenchmarkElasticWrites counts the API writes of an elastic set's scale from zero and back
// against a real API server: two nodes powered up by Slurm for a job (pods 0 → 2), up, idle
// past the timeout and powered down by the operator, then powering down (pods 2 → 0). Each
// step is reconciled twice (the second finds the status settled). The physical limit is the
// StatefulSet's replicas and the status's desired count each way, and on the way down the
// status's Slurm counts once more (the job's end turns allocated nodes idle): 2 writes up, 3
// down, none while nothing changes.
func BenchmarkElasticWrites(b *testing.B) {
	ctx := context.Background()
	c, direct := benchAPIServer(b)
	var writes atomic.Int64
	fake := &scriptedSlurm{}
	r := &controller.SlurmClusterReconciler{Client: countingClient(direct, &writes), APIReader: direct, Scheme: c.Scheme(),
		SlurmClient: func(*slurmv1alpha1.SlurmCluster, []byte) controller.SlurmAPI { return fake }}
	replicas := func(name string) int32 {
		set := &appsv1.StatefulSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "bench", Name: name}, set); err != nil {
			b.Fatal(err)
		}
		return *set.Spec.Replicas
	}
	var up, steady, down int64
	for i := 0; b.Loop(); i++ {
		sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
		if err != nil {
			b.Fatal(err)
		}
		sc.Namespace, sc.Name = "bench", fmt.Sprintf("el%d", i)
		sc.Spec.SlurmNodes.Worker.Size = 2
		sc.Spec.SlurmNodes.Worker.Autoscaling = &slurmv1alpha1.Autoscaling{Enabled: true, MaxSize: 2, IdleTimeoutSeconds: 60, ResumeTimeoutSeconds: 600}
		if err := c.Create(ctx, sc); err != nil {
			b.Fatal(err)
		}
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(sc)}
		step := func(state ...string) int64 {
			fake.set(state...)
			writes.Store(0)
			for range 2 {
				if _, err := r.Reconcile(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			return writes.Load()
		}
		step("IDLE", "CLOUD", "POWERED_DOWN") // create
		steady += step("IDLE", "CLOUD", "POWERED_DOWN")
		if got := replicas(sc.Name + "-worker"); got != 0 {
			b.Fatalf("no pod at rest: %d", got)
		}
		up += step("ALLOCATED", "CLOUD", "POWERING_UP")
		if got := replicas(sc.Name + "-worker"); got != 2 {
			b.Fatalf("two pods for a two-node job: %d", got)
		}
		up += step("ALLOCATED", "CLOUD")
		down += step("IDLE", "CLOUD") // the job ended, idle for an hour: asked down in Slurm
		down += step("IDLE", "CLOUD", "POWERING_DOWN")
		down += step("IDLE", "CLOUD", "POWERED_DOWN")
		if got := replicas(sc.Name + "-worker"); got != 0 {
			b.Fatalf("no pod after the power-down: %d", got)
		}
	}
	b.ReportMetric(float64(up)/float64(b.N), "writes-up")
	b.ReportMetric(float64(down)/float64(b.N), "writes-down")
	b.ReportMetric(float64(steady)/float64(b.N), "writes/steady")
}

// benchAPIServer starts a real API server with the CRDs for a benchmark (stopped when it ends)
// and a namespace "bench", and returns a client and a client that reads past any cache.
func benchAPIServer(b *testing.B) (client.Client, client.WithWatch) {
	b.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("needs KUBEBUILDER_ASSETS (make bench)")
	}
	env, c, _, err := kube.StartEnv([]string{filepath.Join("..", "..", "config", "crd", "bases")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		b.Fatal(err)
	}
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: c.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	return c, direct
}
