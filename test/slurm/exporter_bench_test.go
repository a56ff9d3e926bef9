package slurm_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/exporter"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/metricstest"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// BenchmarkExporterScrapeAtScale scrapes the exporter, over HTTP, of a real slurmctld that
// holds EXPORTER_BENCH_NODES nodes (1,000) and EXPORTER_BENCH_JOBS jobs (10,000, held, so
// they stay pending), and reports the time of one scrape, the slurmctld RPCs one scrape makes
// (from slurmctld's own statistics) and the series it serves. One worker runs slurmd; the
// others resolve to the controller host, where no slurmd answers (they go down, as nodes of a
// cluster being created do). Run with 'make bench-exporter' (part of 'make bench').
func BenchmarkExporterScrapeAtScale(b *testing.B) {
	if os.Getenv("SLURM_ROOTFS") == "" {
		b.Skip("SLURM_ROOTFS is not set (make bench-exporter)")
	}
	s := startScaleCluster(b, os.Getenv("SLURM_ROOTFS"))
	benchExporterScrape(b, s)
}

// scaleCluster is a real slurmctld with many nodes and held jobs, for the scrape benchmarks.
type scaleCluster struct {
	ctx         context.Context
	c           *slurmharness.Cluster
	cl          *slurm.Client
	nodes, jobs int
}

// startScaleCluster starts slurmctld (and slurmrestd, as the controller pod runs it) from root,
// with EXPORTER_BENCH_NODES nodes (1,000) and EXPORTER_BENCH_JOBS jobs (10,000, held, so they
// stay pending). One worker runs slurmd; the others resolve to the controller host, where no
// slurmd answers (they go down, as nodes of a cluster being created do). extra are slurm.conf
// lines added to the spec.
func startScaleCluster(b *testing.B, root string, extra ...slurmv1alpha1.ConfigLine) *scaleCluster {
	b.Helper()
	nodes, jobs := envInt("EXPORTER_BENCH_NODES", 1000), envInt("EXPORTER_BENCH_JOBS", 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	b.Cleanup(cancel)
	sc := spec(b, int32(nodes))
	sc.Spec.SlurmConfig.ExtraSlurmConf = append(sc.Spec.SlurmConfig.ExtraSlurmConf, slurmv1alpha1.ConfigLine(fmt.Sprintf("MaxJobCount=%d", 2*jobs+1000)))
	sc.Spec.SlurmConfig.ExtraSlurmConf = append(sc.Spec.SlurmConfig.ExtraSlurmConf, extra...)
	r := render(b, sc)
	c := startClusterWith(b, ctx, r, 1, func(cfg *slurmharness.Config) {
		cfg.RootFS = root
		for i := 1; i < nodes; i++ {
			cfg.Controller.Aliases = append(cfg.Controller.Aliases, fmt.Sprintf("demo-worker-%d", i))
		}
	})
	cl, err := slurmtest.StartRestd(ctx, c, ctlHost, r.in.Cluster, r.in.Keys.JWT)
	if err != nil {
		b.Fatal(err)
	}
	// A job list of this size takes seconds to write (26.05's more than 15 s here): the
	// exporter's own timeout (a minute below) is the one measured, not the test client's.
	cl.HTTP.Timeout = 2 * time.Minute
	t0 := time.Now()
	if out, err := c.Exec(ctx, loginHost, "sh", "-c", fmt.Sprintf("seq %d | xargs -P 4 -I{} sbatch -H -Q -o /dev/null -J bench-{} --wrap true", jobs)); err != nil {
		b.Fatalf("submit %d jobs: %v\n%s", jobs, err, out)
	}
	b.Logf("%s: submitted %d held jobs in %s", scontrolVersion(b, ctx, c, ctlHost), jobs, time.Since(t0).Round(time.Second))
	return &scaleCluster{ctx: ctx, c: c, cl: cl, nodes: nodes, jobs: jobs}
}

// benchExporterScrape scrapes the exporter over HTTP and reports the time of one scrape, the
// slurmctld RPCs one scrape makes (from slurmctld's own statistics) and the series it serves.
func benchExporterScrape(b *testing.B, s *scaleCluster) {
	ctx, c, cl, nodes, jobs := s.ctx, s.c, s.cl, s.nodes, s.jobs
	reg := prometheus.NewRegistry()
	reg.MustRegister(exporter.New(cl, exporter.Options{Cluster: "demo", Accounting: true, PerUser: true, Timeout: time.Minute, MaxAge: time.Minute}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	client := &http.Client{Timeout: 2 * time.Minute}
	m, err := metricstest.Scrape(client, srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	if got := len(m.NodeStates()); got != nodes {
		b.Fatalf("the exporter sees %d nodes, want %d", got, nodes)
	}
	if got := m.By("slurm_partition_jobs", "state")["pending"]; int(got) != jobs {
		b.Fatalf("the exporter sees %v pending jobs, want %d", got, jobs)
	}

	d := startDiag(b, ctx, cl)
	b.ResetTimer()
	scrapes := 0
	for b.Loop() {
		if m, err = metricstest.Scrape(client, srv.URL); err != nil {
			b.Fatal(err)
		}
		scrapes++
	}
	b.StopTimer()
	parts := d.report(b, scrapes)
	if peak := peakRSS(c.PID(ctlHost, "slurmrestd")); peak > 0 {
		b.ReportMetric(peak, "slurmrestd-peak-MiB")
	}
	b.ReportMetric(float64(len(m)), "series")
	b.ReportMetric(m["slurm_exporter_request_duration_seconds{resource=jobs}"]*1000, "jobs-request-ms")
	b.ReportMetric(m["slurm_exporter_request_duration_seconds{resource=nodes}"]*1000, "nodes-request-ms")
	b.Logf("%d nodes, %d jobs: %d scrapes; slurmctld RPCs per scrape: %s", nodes, jobs, scrapes, parts)
}

// diagDelta measures slurmctld's RPCs (count and time serving them) between two diag reads.
type diagDelta struct {
	ctx    context.Context
	cl     *slurm.Client
	before slurm.Diag
}

func startDiag(b *testing.B, ctx context.Context, cl *slurm.Client) *diagDelta {
	b.Helper()
	d, err := cl.Diag(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return &diagDelta{ctx: ctx, cl: cl, before: d}
}

// report reports rpcs/scrape and slurmctld-ms/scrape since startDiag, less the second diag
// read's own RPC, and returns the RPCs per scrape by type.
func (d *diagDelta) report(b *testing.B, scrapes int) string {
	b.Helper()
	after, err := d.cl.Diag(d.ctx)
	if err != nil {
		b.Fatal(err)
	}
	byType := map[string]int64{}
	var micros int64
	for _, r := range after.RPCsByMessageType {
		byType[r.MessageType] += r.Count
		micros += r.TotalTime
	}
	for _, r := range d.before.RPCsByMessageType {
		byType[r.MessageType] -= r.Count
		micros -= r.TotalTime
	}
	byType["REQUEST_STATS_INFO"]--
	var total int64
	var parts []string
	for t, n := range byType {
		if n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%s %.1f", t, float64(n)/float64(scrapes)))
		}
	}
	sort.Strings(parts)
	b.ReportMetric(float64(total)/float64(scrapes), "rpcs/scrape")
	b.ReportMetric(float64(micros)/float64(scrapes)/1000, "slurmctld-ms/scrape")
	return strings.Join(parts, ", ")
}

// peakRSS is the peak resident memory of a process, in MiB (0 when it cannot be read).
func peakRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kib, _ := strconv.ParseFloat(f[1], 64)
			return kib / 1024
		}
	}
	return 0
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
