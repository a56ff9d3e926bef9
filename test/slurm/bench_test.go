package slurm_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
)

// BenchmarkScaleUpToIdle measures, on real Slurm, the time from the new config landing in the
// controller's /etc/slurm (what the kubelet does after the operator updates the ConfigMap) and
// the new worker's slurmd starting, to the new node being idle in Slurm. The reconfigure
// sidecar looks every 5 s, so expect up to about 5 s. Then it scales back down, as the
// operator does, outside the timer. Run with 'make bench'.
func BenchmarkScaleUpToIdle(b *testing.B) {
	if os.Getenv("SLURM_ROOTFS") == "" {
		b.Skip("SLURM_ROOTFS is not set (make bench)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	two, three := render(b, spec(b, 2)), render(b, spec(b, 3))
	c := startCluster(b, ctx, two, 2)
	cl, err := slurmtest.StartRestd(ctx, c, ctlHost, two.in.Cluster, two.in.Keys.JWT)
	if err != nil {
		b.Fatal(err)
	}
	if err := slurmtest.StartReconfigureSidecar(ctx, c, ctlHost); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		if err := c.UpdateSlurmFiles(three.files); err != nil {
			b.Fatal(err)
		}
		if err := c.AddWorker(ctx, podWorker(b, three, 2)); err != nil {
			b.Fatal(err)
		}
		if err := c.WaitFor(ctx, "worker-2 idle", func() (bool, error) {
			n, err := cl.Node(ctx, "worker-2")
			return err == nil && n.Has("IDLE") && !n.Down() && !n.Has("DRAIN"), nil
		}); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		if err := cl.Drain(ctx, "worker-2", slurmfacts.DrainScaleDown); err != nil {
			b.Fatal(err)
		}
		if err := c.StopWorker(ctx, "demo-worker-2"); err != nil {
			b.Fatal(err)
		}
		if err := c.UpdateSlurmFiles(two.files); err != nil {
			b.Fatal(err)
		}
		if err := c.WaitFor(ctx, "worker-2 gone", func() (bool, error) {
			_, err := cl.Node(ctx, "worker-2")
			return err != nil, nil
		}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-to-idle")
}
