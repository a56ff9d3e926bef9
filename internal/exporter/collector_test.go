package exporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// recorded answers slurmrestd 24.11 gave on the real-Slurm harness (two workers with two H100
// each; worker-0 runs a one-GPU job, worker-1 was drained by an admin, a two-node job waits).
type recorded struct {
	t    *testing.T
	down bool
	// The collector asks in parallel: calls is guarded.
	mu    sync.Mutex
	calls map[string]int
}

var errDown = errors.New("connection refused")

func (r *recorded) load(name string, out any) error {
	r.mu.Lock()
	r.calls[name]++
	r.mu.Unlock()
	if r.down {
		return errDown
	}
	data, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		r.t.Fatal(err)
	}
	return json.Unmarshal(data, out)
}

func (r *recorded) Nodes(context.Context) ([]slurm.Node, error) {
	var v struct{ Nodes []slurm.Node }
	err := r.load("nodes", &v)
	return v.Nodes, err
}

func (r *recorded) Jobs(context.Context) ([]slurm.Job, error) {
	var v struct{ Jobs []slurm.Job }
	err := r.load("jobs", &v)
	return v.Jobs, err
}

func (r *recorded) Diag(context.Context) (slurm.Diag, error) {
	var v struct{ Statistics slurm.Diag }
	err := r.load("diag", &v)
	return v.Statistics, err
}

func (r *recorded) Pings(context.Context) ([]slurm.Ping, error) {
	var v struct{ Pings []slurm.Ping }
	err := r.load("ping", &v)
	return v.Pings, err
}

func (r *recorded) DatabasePings(context.Context) ([]slurm.Ping, error) {
	var v struct{ Pings []slurm.Ping }
	err := r.load("dbping", &v)
	return v.Pings, err
}

// series is a gathered metric family's samples by their labels (cluster left out), as
// "name{k=v,…}".
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.Label {
				if l.GetName() == "cluster" {
					if l.GetValue() != "demo" {
						t.Errorf("%s: cluster=%q", mf.GetName(), l.GetValue())
					}
					continue
				}
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = value(mf.GetType(), m)
		}
	}
	return out
}

func value(typ dto.MetricType, m *dto.Metric) float64 {
	if typ == dto.MetricType_COUNTER {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

func TestMetricsOfRecordedAnswers(t *testing.T) {
	src := &recorded{t: t, calls: map[string]int{}}
	got := gather(t, New(src, Options{Cluster: "demo", Accounting: true, PerUser: true, MaxAge: time.Minute}))
	for series, want := range map[string]float64{
		"slurm_up{}": 1,
		"slurm_node_state{node=worker-0,operator_reason=,reason_owner=,state=mixed}":                                                                1,
		"slurm_node_state{node=worker-1,operator_reason=,reason_owner=admin,state=drained}":                                                         1,
		"slurm_partition_nodes{operator_reason=,partition=main,reason_owner=admin,state=drained}":                                                   1,
		"slurm_node_reason_since_timestamp_seconds{node=worker-1,operator_reason=,reason=admin: test,reason_owner=admin,set_by=root,state=drained}": 1796078365,
		"slurm_partition_nodes{operator_reason=,partition=main,reason_owner=,state=mixed}":                                                          1,
		"slurm_node_cpus{node=worker-0}":                                                          2,
		"slurm_node_cpus_allocated{node=worker-0}":                                                1,
		"slurm_node_cpus_idle{node=worker-0}":                                                     1,
		"slurm_node_memory_bytes{node=worker-0}":                                                  3072 * mib,
		"slurm_node_memory_allocated_bytes{node=worker-0}":                                        100 * mib,
		"slurm_node_gpus{node=worker-0,type=h100}":                                                2,
		"slurm_node_gpus_allocated{node=worker-0,type=h100}":                                      1,
		"slurm_node_gpus_idle{node=worker-1,type=h100}":                                           2,
		"slurm_partition_gpus{partition=main,type=h100}":                                          4,
		"slurm_partition_gpus_allocated{partition=main,type=h100}":                                1,
		"slurm_partition_cpus{partition=main}":                                                    4,
		"slurm_node_info{node=worker-1,node_set=worker}":                                          1,
		"slurm_node_set_gpus{node_set=worker,type=h100}":                                          4,
		"slurm_node_set_gpus_allocated{node_set=worker,type=h100}":                                1,
		"slurm_node_set_cpus_idle{node_set=worker}":                                               3,
		"slurm_node_set_nodes{node_set=worker,operator_reason=,reason_owner=admin,state=drained}": 1,
		"slurm_partition_jobs{partition=main,state=running}":                                      1,
		"slurm_partition_jobs{partition=main,state=pending}":                                      1,
		"slurm_partition_jobs_pending{partition=main,reason=Resources}":                           1,
		"slurm_partition_job_gpus{partition=main,state=pending}":                                  4,
		"slurm_partition_job_gpus{partition=main,state=running}":                                  1,
		"slurm_account_jobs{account=root,partition=main,state=pending}":                           1,
		"slurm_user_job_cpus{account=root,partition=main,state=pending,user=root}":                2,
		"slurm_jobs_submitted_total{}":                                                            2,
		"slurm_jobs_started_total{}":                                                              1,
		"slurm_rpcs_total{type=REQUEST_NODE_INFO}":                                                7,
		"slurm_controller_up{host=demo-controller-0,mode=primary}":                                1,
		"slurm_slurmdbd_up{}":                                                                     1,
		"slurm_scheduler_cycle_last_seconds{}":                                                    0.000833,
		"slurm_exporter_answer_age_seconds{resource=nodes}":                                       0,
		"slurm_exporter_request_errors_total{resource=jobs}":                                      0,
	} {
		v, ok := got[series]
		if !ok {
			t.Errorf("%s is missing", series)
			continue
		}
		if v != want && !(series == "slurm_exporter_answer_age_seconds{resource=nodes}" && v < 1) {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
	for series := range got {
		if strings.HasPrefix(series, "slurm_node_reason_since_timestamp_seconds{node=worker-0,") {
			t.Errorf("a node in service has a reason series: %s", series)
		}
	}
	// Per-user metrics off: no series names a user. No MaxAge: the default, so the answer
	// just fetched is exported.
	off := gather(t, New(src, Options{Cluster: "demo"}))
	if _, ok := off["slurm_node_info{node=worker-0,node_set=worker}"]; !ok {
		t.Errorf("without MaxAge the nodes' answer is left out: %d series", len(off))
	}
	for series := range off {
		if strings.Contains(series, "user=") || strings.HasPrefix(series, "slurm_slurmdbd_up") {
			t.Errorf("with per-user metrics and accounting off: %s", series)
		}
	}
}

// A scrape within MinInterval of the last refresh asks Slurm nothing; when Slurm stops
// answering, the last good answer is exported with its age until MaxAge, then left out, and
// slurm_up says Slurm does not answer from the first failed refresh.
func TestStaleAnswersAreAgedAndDropped(t *testing.T) {
	src := &recorded{t: t, calls: map[string]int{}}
	now := time.Unix(1_800_000_000, 0)
	c := New(src, Options{Cluster: "demo", MinInterval: 10 * time.Second, MaxAge: time.Minute, Now: func() time.Time { return now }})
	gather(t, c)
	now = now.Add(5 * time.Second)
	gather(t, c)
	src.mu.Lock()
	calls := fmt.Sprint(src.calls)
	once := src.calls["nodes"] == 1 && src.calls["jobs"] == 1 && src.calls["diag"] == 1 && src.calls["ping"] == 1 && src.calls["dbping"] == 0
	src.mu.Unlock()
	if !once {
		t.Fatalf("two scrapes 5s apart asked %s; want one request per resource", calls)
	}

	src.down = true
	now = now.Add(25 * time.Second)
	got := gather(t, c)
	if got["slurm_up{}"] != 0 {
		t.Errorf("slurm_up = %v while slurmctld does not answer", got["slurm_up{}"])
	}
	if age := got["slurm_exporter_answer_age_seconds{resource=nodes}"]; age != 30 {
		t.Errorf("nodes' answer age = %v, want 30", age)
	}
	if got["slurm_exporter_request_errors_total{resource=nodes}"] != 1 {
		t.Errorf("errors = %v", got["slurm_exporter_request_errors_total{resource=nodes}"])
	}
	if _, ok := got["slurm_node_state{node=worker-0,operator_reason=,reason_owner=,state=mixed}"]; !ok {
		t.Error("the last good node states are not served while younger than MaxAge")
	}
	if _, ok := got["slurm_controller_up{host=demo-controller-0,mode=primary}"]; ok {
		t.Error("an old ping is served as if slurmctld answered now")
	}

	now = now.Add(time.Minute)
	got = gather(t, c)
	for series := range got {
		if strings.HasPrefix(series, "slurm_node_") || strings.HasPrefix(series, "slurm_partition_") || strings.HasPrefix(series, "slurm_jobs_") {
			t.Errorf("%s served from an answer older than MaxAge", series)
		}
	}
	if age := got["slurm_exporter_answer_age_seconds{resource=nodes}"]; age != 90 {
		t.Errorf("nodes' answer age = %v, want 90", age)
	}
}

func TestGresAndTRES(t *testing.T) {
	for gres, want := range map[string]map[string]int64{
		"gpu:h100:8(S:0-1)":           {"h100": 8},
		"gpu:4(IDX:0-3)":              {"": 4},
		"gpu:h100:1(IDX:0,2),shard:8": {"h100": 1},
		"gpu:a100:2,gpu:h100:1(S:1)":  {"a100": 2, "h100": 1},
		"gpu:h100:0(IDX:N/A)":         {"h100": 0},
		"(null)":                      {},
		"":                            {},
	} {
		got := GPUsByType(gres)
		if len(got) != len(want) {
			t.Errorf("%q: %v, want %v", gres, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%q: %v, want %v", gres, got, want)
			}
		}
	}
	if c, g := TRES("cpu=2,mem=3G,node=2,billing=2,gres/gpu=4,gres/gpu:h100=4"); c != 2 || g != 4 {
		t.Errorf("TRES = %d CPUs, %d GPUs", c, g)
	}
	if c, g := TRES("cpu=8,gres/gpu:h100=2,gres/gpu:a100=1"); c != 8 || g != 3 {
		t.Errorf("typed TRES = %d CPUs, %d GPUs", c, g)
	}
}

// A node's set is its name less the index: the operator names a set's nodes <set>-<index>.
func TestNodeSetOf(t *testing.T) {
	for name, want := range map[string]string{
		"worker-0": "worker", "a100-12": "a100", "cpu-3": "cpu", "node": "", "worker-": "", "-1": "", "gpu-a": "", "my-set-2": "my-set",
	} {
		if got := NodeSetOf(name); got != want {
			t.Errorf("NodeSetOf(%q) = %q, want %q", name, got, want)
		}
	}
}
