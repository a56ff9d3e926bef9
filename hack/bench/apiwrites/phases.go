package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
)

type bench struct {
	cfg      config
	admin    client.Client
	auditLog string
	user     string
	pid      int
}

// report prints what the manager asked in [from, to).
func (b *bench) report(name string, from, to time.Time) (window, error) {
	// The audit log is written as requests complete: leave the last ones time to land.
	time.Sleep(time.Second)
	w, err := count(b.auditLog, b.user, from, to)
	if err != nil {
		return w, err
	}
	fmt.Printf("== %s (%s), manager RSS %.0f MiB\n  %s\n", name, to.Sub(from).Round(time.Second), rssMiB(b.pid), w)
	if b.cfg.why {
		for i, p := range w.written {
			if i == 30 {
				fmt.Printf("    … %d more writes\n", len(w.written)-i)
				break
			}
			fmt.Printf("    %s\n", p)
		}
		for i, p := range w.statusPatches {
			if i == 3 {
				break
			}
			fmt.Printf("    status patch %s\n", p)
		}
	}
	return w, nil
}

func (b *bench) phases(ctx context.Context, started time.Time) error {
	time.Sleep(10 * time.Second)
	if _, err := b.report("start-up, no cluster", started, time.Now()); err != nil {
		return err
	}

	// One cluster: a controller, 8 CPU workers, 1 login; accounting and exporter off.
	if err := b.namespace(ctx, "one"); err != nil {
		return err
	}
	sc, err := cluster("one", "bench", 8)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.admin.Create(ctx, sc); err != nil {
		return err
	}
	if d, err := b.waitWorkers(ctx, "one", 1, 8, b.cfg.applyWindow); err == nil {
		fmt.Printf("one cluster: its worker StatefulSet exists %s after the apply\n", d.Round(time.Millisecond))
	}
	time.Sleep(time.Until(t0.Add(b.cfg.applyWindow)))
	if _, err := b.report("the first window after applying one cluster", t0, time.Now()); err != nil {
		return err
	}

	t1 := time.Now()
	time.Sleep(b.cfg.steadyWindow)
	if _, err := b.report("steady state", t1, time.Now()); err != nil {
		return err
	}

	t2 := time.Now()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"slurmNodes":{"worker":{"size":16}}}}`))
	if err := b.admin.Patch(ctx, sc, patch); err != nil {
		return err
	}
	time.Sleep(b.cfg.scaleWindow)
	if _, err := b.report("after scaling workers 8 → 16", t2, time.Now()); err != nil {
		return err
	}

	if err := b.threeSets(ctx); err != nil {
		return err
	}

	for _, n := range b.cfg.many {
		if err := b.manyClusters(ctx, n); err != nil {
			return err
		}
	}
	if b.cfg.nodes > 0 {
		return b.gpuNodes(ctx, b.cfg.nodes)
	}
	return nil
}

// threeSets applies a cluster of three worker sets (8 workers, 4 in set a100, 8 in set cpu) and
// two partitions naming them, then scales one set: the writes are the one-cluster phases' with
// one StatefulSet more per set.
func (b *bench) threeSets(ctx context.Context) error {
	if err := b.namespace(ctx, "sets"); err != nil {
		return err
	}
	sc, err := cluster("sets", "mixed", 8)
	if err != nil {
		return err
	}
	zero := int32(0)
	sc.Spec.SlurmNodes.Worker.GPU = &zero
	sc.Spec.SlurmNodes.NodeSets = []slurmv1alpha1.NodeSet{
		{Name: "a100", Size: 4, GPU: &zero, Features: []string{"ib"}},
		{Name: "cpu", Size: 8, GPU: &zero},
	}
	sc.Spec.SlurmConfig.Partitions = []slurmv1alpha1.Partition{
		{Name: "gpu", Default: true, NodeSets: []string{"worker", "a100"}},
		{Name: "cpu", NodeSets: []string{"cpu"}},
	}
	t0 := time.Now()
	if err := b.admin.Create(ctx, sc); err != nil {
		return err
	}
	time.Sleep(time.Until(t0.Add(b.cfg.applyWindow)))
	if _, err := b.report("the first window after applying a cluster of three sets", t0, time.Now()); err != nil {
		return err
	}
	t1 := time.Now()
	time.Sleep(b.cfg.steadyWindow)
	if _, err := b.report("three sets, steady", t1, time.Now()); err != nil {
		return err
	}
	t2 := time.Now()
	patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/slurmNodes/nodeSets/0/size","value":6}]`))
	if err := b.admin.Patch(ctx, sc, patch); err != nil {
		return err
	}
	time.Sleep(b.cfg.scaleWindow)
	if _, err := b.report("after scaling set a100 4 → 6", t2, time.Now()); err != nil {
		return err
	}
	return b.backups(ctx, sc)
}

// backups turns scheduled backups on for sc (one CronJob more), then moves the CronJob's status
// as Kubernetes' CronJob controller does at each run: the first should cost the CronJob's
// create, the second nothing.
func (b *bench) backups(ctx context.Context, sc *slurmv1alpha1.SlurmCluster) error {
	t0 := time.Now()
	patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/spec/volumeSources/-","value":{"name":"backups","persistentVolumeClaim":{"claimName":"backups"}}},`+
		`{"op":"add","path":"/spec/backups","value":{"schedule":"@daily","volumeSourceName":"backups"}}]`))
	if err := b.admin.Patch(ctx, sc, patch); err != nil {
		return err
	}
	time.Sleep(b.cfg.scaleWindow)
	if _, err := b.report("after turning scheduled backups on", t0, time.Now()); err != nil {
		return err
	}
	t1 := time.Now()
	cj := &batchv1.CronJob{}
	if err := b.admin.Get(ctx, types.NamespacedName{Namespace: sc.Namespace, Name: sc.BackupCronJobName()}, cj); err != nil {
		return err
	}
	for i := range 3 {
		at := metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second))
		cj.Status.LastScheduleTime, cj.Status.LastSuccessfulTime = &at, &at
		if err := b.admin.Status().Update(ctx, cj); err != nil {
			return err
		}
	}
	time.Sleep(b.cfg.scaleWindow)
	_, err := b.report("three runs of the backup CronJob (its status moved three times)", t1, time.Now())
	return err
}

// manyClusters applies n clusters at once in a namespace of their own.
func (b *bench) manyClusters(ctx context.Context, n int) error {
	ns := fmt.Sprintf("many-%d", n)
	if err := b.namespace(ctx, ns); err != nil {
		return err
	}
	clusters := make([]*slurmv1alpha1.SlurmCluster, n)
	for i := range clusters {
		sc, err := cluster(ns, fmt.Sprintf("c%03d", i), b.cfg.manyWorkers)
		if err != nil {
			return err
		}
		clusters[i] = sc
	}
	t0 := time.Now()
	var failed atomic.Int32
	work := make(chan *slurmv1alpha1.SlurmCluster)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sc := range work {
				if err := b.admin.Create(ctx, sc); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for _, sc := range clusters {
		work <- sc
	}
	close(work)
	wg.Wait()
	applied := time.Since(t0)
	if failed.Load() > 0 {
		return fmt.Errorf("%d of %d clusters could not be created", failed.Load(), n)
	}
	d, err := b.waitWorkers(ctx, ns, n, b.cfg.manyWorkers, b.cfg.manyWindow)
	if err != nil {
		fmt.Printf("%d clusters: %v\n", n, err)
	} else {
		fmt.Printf("%d clusters × %d workers: created in %s; the last worker StatefulSet exists %s after the first create\n",
			n, b.cfg.manyWorkers, applied.Round(time.Millisecond), d.Round(time.Millisecond))
	}
	time.Sleep(time.Until(t0.Add(b.cfg.manyWindow)))
	if _, err := b.report(fmt.Sprintf("%d clusters applied at once", n), t0, time.Now()); err != nil {
		return err
	}
	t1 := time.Now()
	time.Sleep(b.cfg.steadyWindow / 3)
	_, err = b.report(fmt.Sprintf("%d clusters, steady", n), t1, time.Now())
	return err
}

// gpuNodes fills the cache with n GPU nodes, then changes one GPU label and one other label.
func (b *bench) gpuNodes(ctx context.Context, n int) error {
	t0 := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("gpu-%05d", i),
					Labels: map[string]string{
						"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8",
						"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
						"kubernetes.io/hostname": fmt.Sprintf("gpu-%05d", i), "topology.kubernetes.io/zone": "zone-a",
					},
				}}
				if err := b.admin.Create(ctx, node); err != nil {
					failed.Add(1)
					continue
				}
				node.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
				node.Status.Capacity = node.Status.Allocatable
				if err := b.admin.Status().Update(ctx, node); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed.Load() > 0 {
		return fmt.Errorf("%d of %d nodes could not be created", failed.Load(), n)
	}
	fmt.Printf("%d GPU nodes created in %s\n", n, time.Since(t0).Round(time.Second))
	// The new GPU nodes give the clusters a GPU shape: their workers are rendered again, and
	// the StatefulSet controller replaces pods. Wait for that to end before measuring a change.
	if err := b.quiet(10*time.Second, 5*time.Minute); err != nil {
		return err
	}
	if _, err := b.report(fmt.Sprintf("%d GPU nodes in the cache, until the manager is quiet", n), t0, time.Now()); err != nil {
		return err
	}
	for _, change := range []struct{ what, patch string }{
		{"a label that is not about GPUs", `{"metadata":{"labels":{"example.com/rack":"r7"}}}`},
		{"a GPU label (gpu.product)", `{"metadata":{"labels":{"nvidia.com/gpu.product":"NVIDIA-H200"}}}`},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-00000"}}
		t := time.Now()
		if err := b.admin.Patch(ctx, node, client.RawPatch(types.MergePatchType, []byte(change.patch))); err != nil {
			return err
		}
		time.Sleep(15 * time.Second)
		if _, err := b.report("after one node changed "+change.what, t, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) namespace(ctx context.Context, name string) error {
	return b.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// waitWorkers waits until n worker StatefulSets of the given size exist in ns, and says how
// long after the call that was.
func (b *bench) waitWorkers(ctx context.Context, ns string, n int, size int32, limit time.Duration) (time.Duration, error) {
	t0 := time.Now()
	for time.Since(t0) < limit {
		list := &appsv1.StatefulSetList{}
		if err := b.admin.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{base.LabelComponent: string(slurmv1alpha1.ComponentWorker)}); err != nil {
			return 0, err
		}
		ready := 0
		for _, s := range list.Items {
			if s.Spec.Replicas != nil && *s.Spec.Replicas == size {
				ready++
			}
		}
		if ready >= n {
			return time.Since(t0), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, fmt.Errorf("not every worker StatefulSet exists after %s", limit)
}

// cluster is the measured cluster: the minimal sample with workers CPU-only workers and one
// login node, accounting and exporter off.
func cluster(ns, name string, workers int32) (*slurmv1alpha1.SlurmCluster, error) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_minimal")
	if err != nil {
		return nil, err
	}
	sc.Namespace, sc.Name = ns, name
	sc.Spec.ClusterName = name
	sc.Spec.SlurmNodes.Worker.Size = workers
	sc.Spec.SlurmNodes.Login.Size = 1
	sc.Spec.SlurmNodes.Accounting.Enabled = false
	sc.Spec.SlurmNodes.Exporter.Enabled = false
	return sc, nil
}

// quiet waits until the manager has written nothing for a while, at most limit.
func (b *bench) quiet(still, limit time.Duration) error {
	t0 := time.Now()
	for time.Since(t0) < limit {
		time.Sleep(still)
		w, err := count(b.auditLog, b.user, time.Now().Add(-still), time.Now())
		if err != nil {
			return err
		}
		if w.writes == 0 {
			return nil
		}
	}
	return fmt.Errorf("the manager still writes after %s", limit)
}
