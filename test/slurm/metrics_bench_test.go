package slurm_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkSlurmctldMetricsAtScale compares, on Slurm 26.05 (SLURM_ROOTFS_NEXT) with
// MetricsType=metrics/openmetrics, slurmctld's own OpenMetrics endpoints with the exporter's
// REST scrape, on one slurmctld holding EXPORTER_BENCH_NODES nodes and EXPORTER_BENCH_JOBS held
// jobs (as BenchmarkExporterScrapeAtScale): for each, the time of one scrape, slurmctld's RPCs
// and time per scrape, the series served, and the serving process's peak memory (slurmctld's
// for its endpoints, slurmrestd's for the REST scrape). Run with 'make bench-exporter'.
func BenchmarkSlurmctldMetricsAtScale(b *testing.B) {
	next := os.Getenv("SLURM_ROOTFS_NEXT")
	if next == "" {
		b.Skip("SLURM_ROOTFS_NEXT is not set (make bench-exporter builds the 26.05 root file system)")
	}
	s := startScaleCluster(b, next, "MetricsType=metrics/openmetrics")
	b.Run("openmetrics", func(b *testing.B) { benchOpenMetrics(b, s) })
	b.Run("exporter-rest", func(b *testing.B) { benchExporterScrape(b, s) })
}

// benchOpenMetrics reads every endpoint slurmctld lists at /metrics, from the login host's
// network, as Prometheus would scrape them.
func benchOpenMetrics(b *testing.B, s *scaleCluster) {
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return s.c.Dial(ctx, loginHost, addr)
		},
	}}
	get := func(path string) (string, time.Duration) {
		b.Helper()
		t0 := time.Now()
		resp, err := client.Get("http://" + ctlHost + ":6817" + path)
		if err != nil {
			b.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s %v\n%.500s", path, resp.Status, err, body)
		}
		return string(body), time.Since(t0)
	}
	index, _ := get("/metrics")
	var paths []string
	for _, f := range strings.Fields(index) {
		if i := strings.Index(f, "/metrics/"); i >= 0 {
			paths = append(paths, strings.TrimRight(f[i:], `"',:;<>()`))
		}
	}
	sort.Strings(paths)
	paths = slices.Compact(paths)
	b.Logf("slurmctld's /metrics: %.300q", index)
	if len(paths) == 0 {
		b.Fatalf("slurmctld lists no metrics endpoint at /metrics:\n%.1000s", index)
	}
	series := func(body string) (n int, families map[string]bool) {
		families = map[string]bool{}
		sc := bufio.NewScanner(strings.NewReader(body))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			n++
			name := l
			if i := strings.IndexAny(l, "{ "); i > 0 {
				name = l[:i]
			}
			families[name] = true
		}
		return n, families
	}
	// One read first, to check what is there: every job and node counted somewhere.
	perPath := map[string]time.Duration{}
	bytes, total := 0, 0
	all := map[string]bool{}
	for _, p := range paths {
		body, _ := get(p)
		n, fam := series(body)
		bytes += len(body)
		total += n
		for f := range fam {
			all[f] = true
		}
	}
	names := make([]string, 0, len(all))
	for f := range all {
		names = append(names, f)
	}
	sort.Strings(names)
	b.Logf("endpoints %s: %d series, %d bytes; families: %s", strings.Join(paths, " "), total, bytes, strings.Join(names, " "))

	peak0 := peakRSS(s.c.PID(ctlHost, "slurmctld"))
	d := startDiag(b, s.ctx, s.cl)
	b.ResetTimer()
	scrapes := 0
	for b.Loop() {
		for _, p := range paths {
			_, took := get(p)
			perPath[p] += took
		}
		scrapes++
	}
	b.StopTimer()
	parts := d.report(b, scrapes)
	var each []string
	for _, p := range paths {
		each = append(each, fmt.Sprintf("%s %.1f ms", p, float64(perPath[p].Microseconds())/float64(scrapes)/1000))
	}
	if peak := peakRSS(s.c.PID(ctlHost, "slurmctld")); peak > 0 {
		b.ReportMetric(peak, "slurmctld-peak-MiB")
		b.ReportMetric(peak-peak0, "slurmctld-peak-growth-MiB")
	}
	b.ReportMetric(float64(total), "series")
	b.ReportMetric(float64(bytes)/1024, "KiB/scrape")
	b.Logf("%d nodes, %d jobs: %d scrapes; per endpoint: %s; slurmctld RPCs per scrape: %s", s.nodes, s.jobs, scrapes, strings.Join(each, ", "), parts)
}
