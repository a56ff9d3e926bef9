package slurm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
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
)

// The exporter's token names slurm-metrics, an unprivileged user: with it the exporter serves
// every metric it serves with the operator's token (SlurmUser), with PrivateData unset and set
// as sites commonly set it; with PrivateData=jobs it sees no one's jobs, as docs/observability.md
// says. The same token cannot submit, change or cancel a job, nor drain a node.
func TestTheExporterTokenReadsEverythingAndChangesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := render(t, spec(t, 2))
	c := startCluster(t, ctx, r, 2)
	// slurmctld resolves the token's user in its own passwd, as in the controller pod (the
	// jail's, which the images give this user).
	for _, h := range []string{ctlHost, loginHost} {
		if _, err := c.Exec(ctx, h, "sh", "-c", fmt.Sprintf("getent passwd %[1]s || { groupadd -g %[2]d %[1]s && useradd -r -u %[2]d -g %[2]d -d /nonexistent -s /usr/sbin/nologin %[1]s; }", slurmfacts.MetricsUser, slurmfacts.MetricsUID)); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := slurmtest.StartRestd(ctx, c, ctlHost, r.in.Cluster, r.in.Keys.JWT)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := slurm.Token(r.in.Keys.JWT, slurmfacts.MetricsUser, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	metrics := *admin
	metrics.User, metrics.Key = slurmfacts.MetricsUser, nil
	metrics.Tokens = func() (string, error) { return tok, nil }

	running := sbatch(t, ctx, c, "-w", "worker-0", "--gres=gpu:1", "-c", "1", "--mem=100M", "--wrap", "sleep 300")
	waitRunning(t, ctx, c, running)
	sbatch(t, ctx, c, "-N2", "--gres=gpu:2", "--begin=now+1hour", "--wrap", "sleep 1")

	serve := func(cl *slurm.Client) string {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(exporter.New(cl, exporter.Options{Cluster: "demo", Accounting: true, PerUser: true, Timeout: 10 * time.Second, MaxAge: time.Minute}))
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	adminURL, metricsURL := serve(admin), serve(&metrics)

	same := func(what string) {
		t.Helper()
		var diff string
		if err := c.WaitFor(ctx, what, func() (bool, error) {
			a, m := scrape(t, adminURL), scrape(t, metricsURL)
			diff = compareScrapes(a, m)
			return diff == "", nil
		}); err != nil {
			t.Fatalf("%s: the metrics user's scrape differs from the operator's:\n%s", what, diff)
		}
	}
	same("PrivateData unset")
	if m := scrape(t, metricsURL); m["slurm_user_jobs{account=root,partition=main,state=running,user=root}"] != 1 || m["slurm_slurmdbd_up{}"] != 1 {
		t.Fatalf("the metrics user's scrape misses the running job or slurmdbd:\n%v", m)
	}

	privateData := func(v string) {
		t.Helper()
		files := map[string][]byte{}
		for k, b := range r.files {
			files[k] = b
		}
		files["slurm-extra.conf"] = append(bytes.Clone(r.files["slurm-extra.conf"]), []byte("PrivateData="+v+"\n")...)
		if err := c.UpdateSlurmFiles(files); err != nil {
			t.Fatal(err)
		}
		if err := c.Reconfigure(ctx, loginHost); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitFor(ctx, "PrivateData="+v, func() (bool, error) {
			out, err := c.Exec(ctx, loginHost, "scontrol", "show", "config")
			return err == nil && strings.Contains(out, "PrivateData             = ") && !strings.Contains(out, "PrivateData             = none"), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	privateData("accounts,events,reservations,usage,users")
	same("PrivateData=accounts,events,reservations,usage,users")

	// PrivateData=jobs hides other users' jobs from every user but SlurmUser, root and Slurm
	// operators, who can cancel them: the metrics user sees none (docs/observability.md).
	privateData("jobs")
	if err := c.WaitFor(ctx, "the metrics user's scrape without other users' jobs", func() (bool, error) {
		m := scrape(t, metricsURL)
		a := scrape(t, adminURL)
		return m["slurm_up{}"] == 1 && a["slurm_user_jobs{account=root,partition=main,state=running,user=root}"] == 1 &&
			m["slurm_user_jobs{account=root,partition=main,state=running,user=root}"] == 0, nil
	}); err != nil {
		t.Fatal(err)
	}

	// A stolen token changes nothing.
	submit := map[string]any{"script": "#!/bin/sh\nsleep 1\n", "job": map[string]any{
		"partition": "main", "current_working_directory": "/tmp", "environment": []string{"PATH=/usr/bin:/bin"},
	}}
	for _, call := range []struct {
		what, method, path string
		body               any
	}{
		{"submit a job", http.MethodPost, "/slurm/" + slurm.APIVersion + "/job/submit", submit},
		{"change a job", http.MethodPost, "/slurm/" + slurm.APIVersion + "/job/" + running, map[string]any{"comment": "mine"}},
		{"cancel a job", http.MethodDelete, "/slurm/" + slurm.APIVersion + "/job/" + running, nil},
		{"drain a node", http.MethodPost, "/slurm/" + slurm.APIVersion + "/node/worker-1", map[string]any{"state": []string{"DRAIN"}, "reason": "stolen"}},
	} {
		status, body := restCall(t, ctx, &metrics, tok, call.method, call.path, call.body)
		// slurmrestd answers a refused cancel with 200 and the refusal in the job's status.
		if status < 300 && !strings.Contains(body, `"error_number"`) && !strings.Contains(body, `Access\/permission denied`) {
			t.Errorf("%s with the metrics user's token: HTTP %d, accepted:\n%s", call.what, status, body)
		} else {
			t.Logf("%s with the metrics user's token: HTTP %d, refused", call.what, status)
		}
	}
	if out := login(t, ctx, c, "squeue", "-h", "-o", "%i %T %k"); !strings.Contains(out, running+" RUNNING") || strings.Contains(out, "mine") || strings.Count(strings.TrimSpace(out), "\n") != 1 {
		t.Errorf("squeue after the stolen token's tries (want the running job unchanged and no new job):\n%s", out)
	}
	if out := login(t, ctx, c, "sinfo", "-h", "-n", "worker-1", "-o", "%t"); strings.Contains(out, "drain") {
		t.Errorf("worker-1 was drained with the metrics user's token: %s", out)
	}
}

// compareScrapes says how the metrics user's scrape m differs from the operator's a: every
// metric name must be there, and the series that describe Slurm's state (nodes, partitions,
// jobs, whether the daemons answer) must be equal. Counters of RPCs and scheduler cycles move
// between two scrapes, and the exporter's own timings differ: only their names are compared.
func compareScrapes(a, m metricstest.Samples) string {
	names := func(s metricstest.Samples) map[string]bool {
		out := map[string]bool{}
		for k := range s {
			out[k[:strings.Index(k, "{")]] = true
		}
		return out
	}
	var diffs []string
	if a["slurm_up{}"] != 1 || len(a.Labels("slurm_node_state")) == 0 {
		return "the operator's scrape has no nodes: nothing to compare"
	}
	mn := names(m)
	for n := range names(a) {
		if !mn[n] {
			diffs = append(diffs, "missing "+n)
		}
	}
	state := func(k string) bool {
		for _, p := range []string{"slurm_node_", "slurm_partition_", "slurm_user_job", "slurm_account_job", "slurm_up{", "slurm_slurmdbd_up{", "slurm_controller_up{"} {
			if strings.HasPrefix(k, p) {
				return true
			}
		}
		return false
	}
	for k, v := range a {
		if state(k) && m[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: %v, want %v", k, m[k], v))
		}
	}
	for k := range m {
		if _, ok := a[k]; state(k) && !ok {
			diffs = append(diffs, "extra "+k)
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "\n")
}

// restCall sends one request to slurmrestd with tok, the way a thief holding it would.
func restCall(t *testing.T, ctx context.Context, cl *slurm.Client, tok, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, cl.BaseURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-SLURM-USER-TOKEN", tok)
	req.Header.Set("X-SLURM-USER-NAME", slurmfacts.MetricsUser)
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
