package controller_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// metricValue is the value of the series of a metric family whose labels include these (the
// sum of counters and gauges, the sample count of histograms), and whether there is one.
func metricValue(name string, labels map[string]string) (float64, bool) {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total, found := 0.0, false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			found = true
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				total += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				total += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total, found
}

var _ = Describe("the operator's metrics", func() {
	It("times every reconcile phase, counts requests to Slurm, and says whether a cluster's jail is populated and its scale-down grace", func(ctx SpecContext) {
		ns, _ := minimalCluster(ctx, "metered", 1, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.SlurmNodes.Worker.ScaleDownGracePeriodSeconds = ptr.To[int32](600)
		})
		eventuallyCondition(ctx, ns, "metered", "JailPopulated", "NotManaged", "")
		Eventually(func(g Gomega) {
			v, ok := metricValue("slurm_operator_jail_populated", map[string]string{"namespace": ns, "slurmcluster": "metered"})
			g.Expect(ok).To(BeTrue())
			g.Expect(v).To(Equal(1.0))
			grace, ok := metricValue("slurm_operator_scale_down_grace_seconds", map[string]string{"namespace": ns, "slurmcluster": "metered"})
			g.Expect(ok).To(BeTrue())
			g.Expect(grace).To(Equal(600.0))
		}).WithTimeout(timeout).Should(Succeed())
		for _, phase := range []string{"check the policy", "find the GPU shape", "ensure keys", "plan workers", "render", "apply", "observe children", "label busy workers"} {
			v, ok := metricValue("slurm_operator_reconcile_phase_duration_seconds", map[string]string{"phase": phase})
			Expect(ok).To(BeTrue(), phase)
			Expect(v).To(BeNumerically(">", 0), phase)
		}
		// Every reconcile with workers asks Slurm for its nodes (here an unreachable slurmrestd:
		// the answers are errors, and counted as such).
		Eventually(func(g Gomega) {
			v, ok := metricValue("slurm_operator_slurm_requests_total", map[string]string{"call": "nodes"})
			g.Expect(ok).To(BeTrue())
			g.Expect(v).To(BeNumerically(">", 0))
		}).WithTimeout(timeout).Should(Succeed())
		_, ok := metricValue("slurm_operator_slurm_request_duration_seconds", map[string]string{"call": "nodes"})
		Expect(ok).To(BeTrue())
	})
})
