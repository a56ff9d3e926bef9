package node

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/metricstest"
)

// The exporter's steps of the one-node test: scraped through its Service, and following its
// token Secret through the kubelet.

// checkExporterScrape: the exporter runs from its image and, scraped through its Service, shows the
// node and job states sinfo and squeue show.
func (e *env) checkExporterScrape() {
	e.kubectlOK("rollout", "status", "deployment/"+cluster+"-exporter", "-n", ns, "--timeout=2m")
	addr := strings.TrimSpace(e.kubectlOK("get", "service", cluster+"-exporter", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
	job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-0 -c 1 --gres=gpu:1 --wrap 'sleep 120'"))
	defer e.onLogin("scancel " + job)
	e.waitFor(time.Minute, "job "+job+" running", func() (bool, string) {
		out, _ := e.sshErr(e.login, "squeue -h -j "+job+" -o %T")
		return strings.TrimSpace(out) == "RUNNING", out
	})
	// The exporter reuses answers for 10 s: look until it has seen the job.
	url := fmt.Sprintf("http://%s:%d/metrics", addr, slurmfacts.ExporterPort)
	e.waitFor(time.Minute, "the exporter agrees with sinfo and squeue", func() (bool, string) {
		m, err := metricstest.Scrape(&http.Client{Timeout: 20 * time.Second}, url)
		if err != nil {
			return false, err.Error()
		}
		sinfo, _ := e.sshErr(e.login, "sinfo -N -h -o '%N %t'")
		running, _ := e.sshErr(e.login, "squeue -h -t R -o %i | wc -l")
		states := m.NodeStates()
		report := fmt.Sprintf("sinfo:\n%sexporter: %v; running jobs: squeue %s, exporter %v; slurm_up %v, slurmdbd_up %v",
			sinfo, states, strings.TrimSpace(running), m.By("slurm_partition_jobs", "state")["running"], m["slurm_up{}"], m["slurm_slurmdbd_up{}"])
		lines := strings.Split(strings.TrimSpace(sinfo), "\n")
		// It reads as slurm-metrics, with the operator's token (the JWT key is not in its pod).
		if m["slurm_user_rpcs_total{user=slurm-metrics}"] == 0 {
			return false, report + "; no RPCs from slurm-metrics, the exporter's user"
		}
		if m["slurm_up{}"] != 1 || m["slurm_slurmdbd_up{}"] != 1 || len(states) != len(lines) ||
			fmt.Sprint(m.By("slurm_partition_jobs", "state")["running"]) != strings.TrimSpace(running) ||
			m.By("slurm_node_gpus_allocated", "node")["worker-0"] != 1 {
			return false, report
		}
		for _, l := range lines {
			f := strings.Fields(l)
			if st, _, _ := strings.Cut(states[f[0]], "/"); st != metricstest.SinfoState(f[1]) {
				return false, report
			}
		}
		return true, report
	})
}

// checkExporterFollowsItsToken: the exporter follows its token Secret through the kubelet without a
// restart: a broken token stops its reads, the operator's new one restores them.
func (e *env) checkExporterFollowsItsToken() {
	t := e.t
	addr := strings.TrimSpace(e.kubectlOK("get", "service", cluster+"-exporter", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
	url := fmt.Sprintf("http://%s:%d/metrics", addr, slurmfacts.ExporterPort)
	pod := func() string {
		return strings.TrimSpace(e.kubectlOK("get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance="+cluster+",app.kubernetes.io/component=exporter",
			"-o", `jsonpath={range .items[*]}{.metadata.uid}/{.status.containerStatuses[0].restartCount}{" "}{end}`))
	}
	before := pod()
	up := func(want float64) func() (bool, string) {
		return func() (bool, string) {
			m, err := metricstest.Scrape(&http.Client{Timeout: 20 * time.Second}, url)
			if err != nil {
				return false, err.Error()
			}
			return m["slurm_up{}"] == want, fmt.Sprintf("slurm_up %v", m["slurm_up{}"])
		}
	}
	// The operator would mend the Secret at once: it is stopped while the token is broken.
	replicas := strings.TrimSpace(e.kubectlOK("get", "deployment", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "-o", "jsonpath={.items[0].spec.replicas}"))
	e.kubectlOK("scale", "deployment", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "--replicas=0")
	restored := false
	defer func() {
		if !restored {
			_, _ = e.kubectl("scale", "deployment", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "--replicas="+replicas)
		}
	}()
	e.waitFor(2*time.Minute, "the manager stopped", func() (bool, string) {
		out, _ := e.kubectl("get", "pods", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "-o", "name")
		return strings.TrimSpace(out) == "", out
	})
	e.kubectlOK("patch", "secret", cluster+"-exporter-token", "-n", ns, "--type", "merge", "-p", `{"stringData":{"token":"not-a-token"}}`)
	e.waitFor(4*time.Minute, "the exporter reads the broken token (slurm_up 0)", up(0))
	e.kubectlOK("scale", "deployment", "-n", "slurm-system", "-l", "app.kubernetes.io/name=slurm-operator", "--replicas="+replicas)
	restored = true
	e.waitFor(4*time.Minute, "the exporter reads the operator's new token (slurm_up 1)", up(1))
	if after := pod(); after != before || !strings.HasSuffix(after, "/0") {
		t.Errorf("the exporter pod (uid/restarts) was %q, is %q: it should neither be replaced nor restart", before, after)
	}
}
