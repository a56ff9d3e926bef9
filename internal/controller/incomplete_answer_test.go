package controller_test

import (
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
)

// A slurmrestd that answers 200 with a body that lists no nodes ({}, "nodes": null, an empty
// list, nodes without names) must not be read as "nothing runs". No real slurmrestd answers so
// for a configured cluster, so a stand-in server plays the faulty one; the real client decodes.
var _ = Describe("a Slurm answer that does not account for the nodes", func() {
	for _, body := range []string{`{}`, `{"nodes": null}`, `{"nodes": []}`, `{"nodes": [{"state": ["IDLE"]}]}`} {
		It("keeps busy workers protected, replaces and removes none: "+body, func(ctx SpecContext) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(body))
			}))
			DeferCleanup(srv.Close)
			ns := newNamespace(ctx)
			slurmClients.Store(ns, standInClient(srv.URL))
			DeferCleanup(func() { slurmClients.Delete(ns) })

			applySample(ctx, ns, "blind")
			get(ctx, &appsv1.StatefulSet{}, ns, "blind-worker")
			workerPod(ctx, ns, "blind", 7, "old", true)
			publishRevision(ctx, ns, "blind", 8, "old", "new")

			// The pod of a node the answer lacks counts as busy: the PodDisruptionBudget keeps it.
			Eventually(func(g Gomega) {
				p := get(ctx, &corev1.Pod{}, ns, "blind-worker-7")
				g.Expect(p.Labels).To(HaveKeyWithValue(base.LabelBusy, "true"))
			}).WithTimeout(timeout).Should(Succeed())
			// The outdated pod is not deleted.
			eventuallyCondition(ctx, ns, "blind", "WorkersUpdating", "SlurmAnswerIncomplete", "")
			Consistently(podGone(ctx, ns, "blind-worker-7")).WithTimeout(3 * time.Second).Should(BeFalse())

			// A scale-down drains nothing it cannot see and shrinks nothing.
			updateSpec(ctx, ns, "blind", func(sc *slurmv1alpha1.SlurmCluster) { sc.Spec.SlurmNodes.Worker.Size = 6 })
			eventuallyCondition(ctx, ns, "blind", "ScalingDown", "SlurmAnswerIncomplete", "worker-6")
			Consistently(func() *int32 {
				return get(ctx, &appsv1.StatefulSet{}, ns, "blind-worker").Spec.Replicas
			}).WithTimeout(3 * time.Second).Should(Equal(ptr.To[int32](8)))
		})
	}
})

func standInClient(url string) *slurm.Client {
	return slurm.NewClient(url, []byte("0123456789abcdef0123456789abcdef"))
}
