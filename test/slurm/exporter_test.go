package slurm_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slurm-k8s/slurm-operator/internal/exporter"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/metricstest"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

func scrape(t *testing.T, url string) metricstest.Samples {
	t.Helper()
	m, err := metricstest.Scrape(http.DefaultClient, url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The exporter's metrics, scraped over HTTP, say what sinfo and squeue say at the same moment
// on a real cluster with running, pending and drained work; with slurmctld killed it says Slurm
// does not answer and stops serving the old counts once they are older than its limit.
func TestExporterMatchesSinfoAndSqueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := render(t, spec(t, 3))
	c := startCluster(t, ctx, r, 3)
	cl, err := slurmtest.StartRestd(ctx, c, ctlHost, r.in.Cluster, r.in.Keys.JWT)
	if err != nil {
		t.Fatal(err)
	}
	const maxAge = 3 * time.Second
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(exporter.New(cl, exporter.Options{Cluster: "demo", Accounting: true, PerUser: true, MaxAge: maxAge, Timeout: 5 * time.Second}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	running := sbatch(t, ctx, c, "-w", "worker-0", "--gres=gpu:1", "-c", "1", "--mem=100M", "--wrap", "sleep 300")
	waitRunning(t, ctx, c, running)
	sbatch(t, ctx, c, "-N3", "--gres=gpu:2", "--wrap", "sleep 1")
	login(t, ctx, c, "scontrol", "update", "nodename=worker-1", "state=drain", "reason=admin: bad DIMM")
	if err := cl.Drain(ctx, "worker-2", slurmfacts.DrainScaleDown); err != nil {
		t.Fatal(err)
	}

	// Scrape between two identical sinfo/squeue readings, so all three saw the same moment.
	var m metricstest.Samples
	var nodes map[string]string
	var queue string
	if err := c.WaitFor(ctx, "a scrape between two identical sinfo and squeue readings", func() (bool, error) {
		before := login(t, ctx, c, "sinfo", "-N", "-h", "-o", "%N %t %E") + login(t, ctx, c, "squeue", "-h", "-o", "%i %T %P %u %a %r")
		m = scrape(t, srv.URL)
		after := login(t, ctx, c, "sinfo", "-N", "-h", "-o", "%N %t %E")
		queue = login(t, ctx, c, "squeue", "-h", "-o", "%i %T %P %u %a %r")
		nodes = map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(after), "\n") {
			f := strings.Fields(l)
			nodes[f[0]] = f[1]
		}
		// The scheduler has looked at the pending job once it gives a reason.
		return before == after+queue && !strings.Contains(queue, "CONFIGURING") && !regexp.MustCompile(`(?m)PENDING .* None$`).MatchString(queue), nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("sinfo: %v\nsqueue:\n%s", nodes, queue)

	if m["slurm_up{}"] != 1 || m["slurm_slurmdbd_up{}"] != 1 || m["slurm_controller_up{host=demo-controller-0,mode=primary}"] != 1 {
		t.Errorf("up: slurm %v, slurmdbd %v, controller %v", m["slurm_up{}"], m["slurm_slurmdbd_up{}"], m["slurm_controller_up{host=demo-controller-0,mode=primary}"])
	}
	states := m.NodeStates()
	for node, s := range nodes {
		want := metricstest.SinfoState(s)
		if got, _, _ := strings.Cut(states[node], "/"); got != want || want == "" {
			t.Errorf("%s: exporter %q, sinfo %q", node, states[node], s)
		}
	}
	if len(states) != len(nodes) {
		t.Errorf("exporter nodes %v, sinfo nodes %v", states, nodes)
	}
	if states["worker-1"] != "drained/admin/" || states["worker-2"] != "drained/operator/scale-down" {
		t.Errorf("drain owners: worker-1 %q (admin's), worker-2 %q (the operator's)", states["worker-1"], states["worker-2"])
	}
	// Why and since when: the reason text and who set it, at the time slurmctld recorded it.
	for series, reason := range map[string]string{
		"slurm_node_reason_since_timestamp_seconds{node=worker-1,operator_reason=,reason=admin: bad DIMM,reason_owner=admin,set_by=root,state=drained}":                                 "admin's",
		"slurm_node_reason_since_timestamp_seconds{node=worker-2,operator_reason=scale-down,reason=" + slurmfacts.DrainScaleDown + ",reason_owner=operator,set_by=slurm,state=drained}": "operator's",
	} {
		since, ok := m[series]
		if !ok {
			t.Errorf("the %s drain's reason is missing: want %s", reason, series)
			continue
		}
		if age := time.Since(time.Unix(int64(since), 0)); age < 0 || age > 4*time.Minute {
			t.Errorf("%s = %v: set %v ago, want within the test", series, since, age)
		}
	}
	if got := m.By("slurm_partition_nodes", "state"); got[slurm.StateDrained] != 2 || got[slurm.StateMixed] != 1 {
		t.Errorf("partition nodes by state: %v", got)
	}

	wantJobs, wantReasons := map[string]float64{}, map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(queue), "\n") {
		f := strings.Fields(l)
		wantJobs[strings.ToLower(f[1])]++
		if f[1] == "PENDING" {
			// squeue's text prints the scheduler's description of the reason when it has one;
			// its JSON names the reason itself.
			var q struct {
				Jobs []struct {
					Reason string `json:"state_reason"`
				} `json:"jobs"`
			}
			if err := json.Unmarshal([]byte(login(t, ctx, c, "squeue", "--json", "-j", f[0])), &q); err != nil || len(q.Jobs) != 1 {
				t.Fatalf("squeue --json -j %s: %v", f[0], err)
			}
			wantReasons[q.Jobs[0].Reason]++
		}
	}
	gotJobs := m.By("slurm_partition_jobs", "state")
	for state, n := range wantJobs {
		if gotJobs[state] != n {
			t.Errorf("%s jobs: exporter %v, squeue %v", state, gotJobs[state], n)
		}
	}
	if gotReasons := m.By("slurm_partition_jobs_pending", "reason"); len(gotReasons) != len(wantReasons) {
		t.Errorf("pending reasons: exporter %v, squeue %v", gotReasons, wantReasons)
	} else {
		for reason, n := range wantReasons {
			if gotReasons[reason] != n {
				t.Errorf("pending for %s: exporter %v, squeue %v", reason, gotReasons, n)
			}
		}
	}
	if m["slurm_node_gpus_allocated{node=worker-0,type=h100}"] != 1 || m["slurm_partition_gpus{partition=main,type=h100}"] != 6 ||
		m["slurm_partition_gpus_allocated{partition=main,type=h100}"] != 1 || m["slurm_partition_job_gpus{partition=main,state=pending}"] != 6 {
		t.Errorf("GPUs: worker-0 allocated %v, partition %v (allocated %v), pending jobs' %v",
			m["slurm_node_gpus_allocated{node=worker-0,type=h100}"], m["slurm_partition_gpus{partition=main,type=h100}"],
			m["slurm_partition_gpus_allocated{partition=main,type=h100}"], m["slurm_partition_job_gpus{partition=main,state=pending}"])
	}
	if m["slurm_user_jobs{account=root,partition=main,state=running,user=root}"] != 1 {
		t.Errorf("root's running jobs: %v", m.By("slurm_user_jobs", "state"))
	}
	if m["slurm_jobs_submitted_total{}"] < 2 || m["slurm_rpcs_total{type=REQUEST_SUBMIT_BATCH_JOB}"] < 2 {
		t.Errorf("diag: submitted %v, submit RPCs %v", m["slurm_jobs_submitted_total{}"], m["slurm_rpcs_total{type=REQUEST_SUBMIT_BATCH_JOB}"])
	}

	// slurmctld killed: Slurm does not answer; the last counts are served with their age, then
	// left out once older than the limit.
	if err := c.StopDaemon(ctx, ctlHost, slurmharness.Slurmctld, time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	m = scrape(t, srv.URL)
	if m["slurm_up{}"] != 0 {
		t.Errorf("slurm_up = %v with slurmctld stopped", m["slurm_up{}"])
	}
	if v, ok := m["slurm_controller_up{host=demo-controller-0,mode=primary}"]; ok && v != 0 {
		t.Errorf("slurm_controller_up = %v with slurmctld stopped", v)
	}
	if m["slurm_exporter_request_errors_total{resource=nodes}"] < 1 {
		t.Errorf("no failed request counted: %v", m.By("slurm_exporter_request_errors_total", "resource"))
	}
	time.Sleep(maxAge - time.Since(stopped) + time.Second)
	m = scrape(t, srv.URL)
	for series := range m {
		if strings.HasPrefix(series, "slurm_node_") || strings.HasPrefix(series, "slurm_partition_") || strings.HasPrefix(series, "slurm_user_") {
			t.Errorf("served %s from an answer older than %s", series, maxAge)
		}
	}
	if age := m["slurm_exporter_answer_age_seconds{resource=nodes}"]; age < maxAge.Seconds() {
		t.Errorf("nodes' answer age %v s, want at least %v", age, maxAge.Seconds())
	}
	t.Logf("slurmctld stopped: slurm_up %v, nodes' answer %s old", m["slurm_up{}"], strconv.FormatFloat(m["slurm_exporter_answer_age_seconds{resource=nodes}"], 'f', 1, 64))
}
