// Package metricstest scrapes a Prometheus endpoint over HTTP and parses it as Prometheus does
// (prometheus/common/expfmt), for tests that compare metrics with what Slurm's own commands
// print. It is for tests only.
package metricstest

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// Samples are a scrape's samples by `name{k=v,…}` (labels sorted; the cluster label left out).
type Samples map[string]float64

// Scrape gets url and parses the text exposition format.
func Scrape(client *http.Client, url string) (Samples, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := Samples{}
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			var labels []string
			for _, l := range m.Label {
				if l.GetName() != "cluster" {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
			}
			sort.Strings(labels)
			v := m.GetGauge().GetValue()
			if mf.GetType() == dto.MetricType_COUNTER {
				v = m.GetCounter().GetValue()
			}
			out[name+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out, nil
}

// Labels are the labels of the samples of the metric name, one map per sample.
func (s Samples) Labels(name string) []map[string]string {
	var out []map[string]string
	for series := range s {
		rest, ok := strings.CutPrefix(series, name+"{")
		if !ok {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = v
			}
		}
		out = append(out, labels)
	}
	return out
}

// By sums the samples of the metric name by the value of one label.
func (s Samples) By(name, label string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range s {
		if rest, ok := strings.CutPrefix(series, name+"{"); ok {
			for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
				if k, val, _ := strings.Cut(kv, "="); k == label {
					out[val] += v
				}
			}
		}
	}
	return out
}

// NodeStates maps each node of slurm_node_state to "state/reason_owner/operator_reason".
func (s Samples) NodeStates() map[string]string {
	out := map[string]string{}
	for _, l := range s.Labels("slurm_node_state") {
		out[l["node"]] = l["state"] + "/" + l["reason_owner"] + "/" + l["operator_reason"]
	}
	return out
}

// SinfoState is the exporter's name of sinfo's compact node state (idle, mix, alloc, drng, …;
// the flags sinfo appends, such as * for not responding, left out); "" for one it has none for.
func SinfoState(compact string) string {
	return map[string]string{
		"idle": slurm.StateIdle, "mix": slurm.StateMixed, "alloc": slurm.StateAllocated, "comp": slurm.StateCompleting,
		"drng": slurm.StateDraining, "drain": slurm.StateDrained, "down": slurm.StateDown, "fail": slurm.StateFail,
	}[strings.TrimRight(compact, "*~#!%$@^-")]
}
