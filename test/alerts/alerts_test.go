// Package alerts checks the alerts and the Grafana dashboard the operator chart ships
// (charts/slurm-operator/files) with promtool (hack/promtool.sh, which `make` runs):
// the rules parse, their unit tests (alerts_test.yaml) pass, every dashboard query parses as
// PromQL, and every metric the rules and the dashboard name is one the exporter or the
// operator serves.
package alerts

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/slurm-k8s/slurm-operator/internal/controller"
	"github.com/slurm-k8s/slurm-operator/internal/exporter"
)

const (
	rulesFile     = "../../charts/slurm-operator/files/prometheus-rules.yaml"
	dashboardFile = "../../charts/slurm-operator/files/grafana-dashboard.json"
)

// ruleFile is a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert string `json:"alert"`
			Expr  string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin := os.Getenv("PROMTOOL")
	if bin == "" {
		t.Skip("PROMTOOL is not set: run 'make test' or 'make test-alerts' (they install promtool)")
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestRulesPassPromtool(t *testing.T) {
	out := promtool(t, "check", "rules", rulesFile)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	t.Log(promtool(t, "test", "rules", "alerts_test.yaml"))
}

// Every alert of the rules file has a unit test.
func TestEveryAlertIsTested(t *testing.T) {
	var rules ruleFile
	readYAML(t, rulesFile, &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, "alerts_test.yaml", &tests)
	tested := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			tested[a.Alertname] = true
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !tested[r.Alert] {
				t.Errorf("alert %s has no test in alerts_test.yaml", r.Alert)
			}
		}
	}
	if n < 5 {
		t.Errorf("%d alerts", n)
	}
}

// The dashboard's queries, with Grafana's variables given values, parse as PromQL: promtool
// checks them as recording rules.
func TestDashboardQueriesParse(t *testing.T) {
	exprs := dashboardExprs(t)
	if len(exprs) < 20 {
		t.Fatalf("%d queries in the dashboard", len(exprs))
	}
	vars := strings.NewReplacer(`$cluster`, `demo`, `$partition`, `.*`, `$__rate_interval`, `5m`)
	var b strings.Builder
	b.WriteString("groups:\n- name: dashboard\n  rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(vars.Replace(e))
		b.WriteString("  - record: dashboard:query_" + string(rune('a'+i/26)) + string(rune('a'+i%26)) + "\n    expr: " + string(q) + "\n")
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := promtool(t, "check", "rules", f); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules on the dashboard's queries:\n%s", out)
	}
}

// Every metric the alerts and the dashboard name is served by the exporter or the operator.
func TestQueriesNameServedMetrics(t *testing.T) {
	served := map[string]bool{}
	for _, n := range append(exporter.MetricNames(), controller.MetricNames()...) {
		served[n] = true
	}
	var rules ruleFile
	readYAML(t, rulesFile, &rules)
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	exprs = append(exprs, dashboardExprs(t)...)
	name := regexp.MustCompile(`\bslurm_[a-z_]+\b`)
	seen := map[string]bool{}
	for _, e := range exprs {
		for _, m := range name.FindAllString(e, -1) {
			seen[m] = true
		}
	}
	var missing []string
	for m := range seen {
		if !served[m] {
			missing = append(missing, m)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("queries name metrics nothing serves: %v", missing)
	}
	if len(seen) < 15 {
		t.Errorf("only %d metrics named: %v", len(seen), seen)
	}
}

func dashboardExprs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
