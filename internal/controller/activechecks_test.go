package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/checkjob"
)

// cancelWait bounds a wait for cancelled holder jobs to show CANCELLED: a cancelled job is
// COMPLETING until its node reports its processes gone, which slurm.conf's KillWait (30 s)
// allows for, and a loaded machine takes longer than the usual wait.
const cancelWait = time.Minute

var _ = Describe("active checks against a real Slurm cluster", func() {
	It("drains the worker whose check fails with the check's output, and the status names the check, the output and the next run", func(ctx SpecContext) {
		ns, sc := minimalCluster(ctx, "chk", 2, func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.ActiveChecks = []slurmv1alpha1.ActiveCheck{{
				Name:   "marker",
				Script: "if [ -e /shared/broken-$SLURMD_NODENAME ]; then echo \"marker says $SLURMD_NODENAME is broken\"; exit 1; fi\necho fine",
			}}
		})
		cluster, client, _ := startSlurmFromAPI(ctx, ns, sc, 2)
		Expect(os.WriteFile(filepath.Join(cluster.SharedDir(), "broken-worker-1"), nil, 0o644)).To(Succeed())
		for i := 0; i < 2; i++ {
			workerPodOn(ctx, ns, "chk", i, "rev", true, k8sNode(ctx, fmt.Sprintf("%s-node-%d", ns, i), corev1.ConditionTrue))
		}

		By("worker-1 is drained with the check's output; worker-0 passes and stays in service")
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeTrue())
			g.Expect(n.Reason).To(Equal("slurm-operator: check marker: marker says worker-1 is broken"))
		}).WithTimeout(90 * time.Second).Should(Succeed()) // the first look at a started Slurm may be 30 s away
		n0, err := client.Node(ctx, "worker-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(n0.Has("DRAIN")).To(BeFalse(), n0.Reason)

		By("the status: the check's last and next run, one worker passed, worker-1 failing; worker-1 out of service until its next check")
		Eventually(func(g Gomega) {
			cur := &slurmv1alpha1.SlurmCluster{}
			g.Expect(k8sClient.Get(ctx, key(ns, "chk"), cur)).To(Succeed())
			g.Expect(cur.Status.ActiveChecks).To(HaveLen(1))
			st := cur.Status.ActiveChecks[0]
			g.Expect(st.Name).To(Equal("marker"))
			g.Expect(st.Passed).To(Equal(int32(1)))
			g.Expect(st.Failing).To(HaveLen(1))
			g.Expect([]string{st.Failing[0].Node, st.Failing[0].Output}).To(Equal([]string{"worker-1", "marker says worker-1 is broken"}))
			g.Expect(st.Failing[0].Since).NotTo(BeNil())
			g.Expect(st.LastRunTime).NotTo(BeNil())
			g.Expect(st.NextRunTime).NotTo(BeNil())
			g.Expect(st.NextRunTime.Sub(st.LastRunTime.Time)).To(BeNumerically("~", time.Hour, 5*time.Second))
			g.Expect(cur.Status.Workers.OutOfService).To(HaveLen(1))
			o := cur.Status.Workers.OutOfService[0]
			g.Expect(o.Name).To(Equal("worker-1"))
			g.Expect(o.NextCheck).NotTo(BeNil())
			g.Expect(time.Until(o.NextCheck.Time)).To(BeNumerically("~", time.Hour, 2*time.Minute))
			// The operator's metrics say the same: since when worker-1 fails, when it is checked next.
			series := map[string]string{"namespace": ns, "slurmcluster": "chk", "check": "marker", "node": "worker-1"}
			since, ok := metricValue("slurm_operator_active_check_failing_since_timestamp_seconds", series)
			g.Expect(ok).To(BeTrue())
			g.Expect(since).To(Equal(float64(st.Failing[0].Since.Unix())))
			next, ok := metricValue("slurm_operator_active_check_next_run_timestamp_seconds", series)
			g.Expect(ok).To(BeTrue())
			g.Expect(next).To(Equal(float64(o.NextCheck.Unix())))
			_, ok = metricValue("slurm_operator_active_check_next_run_timestamp_seconds", map[string]string{"namespace": ns, "node": "worker-0"})
			g.Expect(ok).To(BeFalse(), "a next-check series for worker-0, which passed")
		}).WithTimeout(timeout).Should(Succeed())
		out, err := cluster.Exec(context.Background(), "chk-login-0", "squeue", "-t", "all", "-h", "-o", "%j|%u|%N|%T")
		Expect(err).NotTo(HaveOccurred())
		for _, w := range []string{"worker-0", "worker-1"} {
			Expect(out).To(ContainSubstring("slurm-operator-check-marker|slurm|"+w+"|"), "the check ran on %s as the slurm user", w)
		}

		By("the check removed from the spec: the status forgets it, and its drain is lifted")
		cur := &slurmv1alpha1.SlurmCluster{}
		Expect(k8sClient.Get(ctx, key(ns, "chk"), cur)).To(Succeed())
		cur.Spec.ActiveChecks = nil
		Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, "chk"), cur)).To(Succeed())
			g.Expect(cur.Status.ActiveChecks).To(BeEmpty())
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeFalse(), n.Reason)
		}).WithTimeout(timeout).Should(Succeed())
		Eventually(func(g Gomega) {
			for _, m := range []string{"slurm_operator_active_check_failing_since_timestamp_seconds", "slurm_operator_active_check_next_run_timestamp_seconds"} {
				_, ok := metricValue(m, map[string]string{"namespace": ns, "slurmcluster": "chk"})
				g.Expect(ok).To(BeFalse(), m)
			}
		}).WithTimeout(timeout).Should(Succeed())

		By("a check run as a Kubernetes Job: a Slurm job holds each worker while the check's pod runs on the worker's Kubernetes node")
		updateSpec(ctx, ns, "chk", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.ActiveChecks = []slurmv1alpha1.ActiveCheck{{Name: "pod", RunAs: slurmv1alpha1.ActiveCheckKubernetesJob,
				Image: "checker:1", Script: "nvidia-smi -q -d ECC"}}
		})
		jobs := map[string]*batchv1.Job{}
		Eventually(func(g Gomega) {
			list := &batchv1.JobList{}
			g.Expect(k8sClient.List(ctx, list, crclient.InNamespace(ns), crclient.MatchingLabels{checkjob.LabelCheck: "pod"})).To(Succeed())
			for i := range list.Items {
				jobs[list.Items[i].Labels[checkjob.LabelNode]] = &list.Items[i]
			}
			g.Expect(jobs).To(HaveLen(2))
		}).WithTimeout(timeout).Should(Succeed())
		out, err = cluster.Exec(context.Background(), "chk-login-0", "squeue", "-h", "-o", "%i|%j|%N|%T")
		Expect(err).NotTo(HaveOccurred())
		for i, w := range []string{"worker-0", "worker-1"} {
			j := jobs[w]
			Expect(out).To(ContainSubstring(j.Labels[checkjob.LabelHolder]+"|slurm-operator-check-pod|"+w+"|RUNNING"), "the Slurm job that holds %s", w)
			pod := j.Spec.Template.Spec
			Expect(pod.NodeName).To(Equal(fmt.Sprintf("%s-node-%d", ns, i)))
			Expect(pod.Containers[0].Image).To(Equal("checker:1"))
			Expect(pod.Containers[0].Command[2]).To(ContainSubstring("nvidia-smi -q -d ECC"))
			Expect(pod.Containers[0].Env).To(ContainElement(corev1.EnvVar{Name: "SLURMD_NODENAME", Value: w}))
			Expect(*j.Spec.ActiveDeadlineSeconds).To(Equal(int64(300)))
			Expect(j.OwnerReferences).To(HaveLen(1))
			Expect(*j.OwnerReferences[0].Controller).To(BeFalse(), "a controller owner would have the render prune it")
		}

		By("the kubelet's part: worker-0's pod passes, worker-1's fails; worker-1 is drained with the pod's output and both holders end")
		endCheckJob(ctx, jobs["worker-0"], 0, "ECC counts zero")
		endCheckJob(ctx, jobs["worker-1"], 2, "xid 79 on GPU 3")
		Eventually(func(g Gomega) {
			n, err := client.Node(ctx, "worker-1")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(n.Has("DRAIN")).To(BeTrue())
			g.Expect(n.Reason).To(Equal("slurm-operator: check pod: xid 79 on GPU 3"))
		}).WithTimeout(timeout).Should(Succeed())
		n0, err = client.Node(ctx, "worker-0")
		Expect(err).NotTo(HaveOccurred())
		Expect(n0.Has("DRAIN")).To(BeFalse(), n0.Reason)
		Eventually(func(g Gomega) {
			out, err := cluster.Exec(context.Background(), "chk-login-0", "squeue", "-h", "-t", "all", "-o", "%i|%T")
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range []string{"worker-0", "worker-1"} {
				g.Expect(out).To(ContainSubstring(jobs[w].Labels[checkjob.LabelHolder]+"|CANCELLED"), "the holder of %s", w)
			}
		}).WithTimeout(cancelWait).Should(Succeed())

		By("a check whose image cannot be pulled drains nobody: its holders end, its Jobs go, an event says why")
		updateSpec(ctx, ns, "chk", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.ActiveChecks = []slurmv1alpha1.ActiveCheck{{Name: "pull", RunAs: slurmv1alpha1.ActiveCheckKubernetesJob,
				Image: "checker:missing", Script: "true"}}
		})
		pulls := map[string]*batchv1.Job{}
		Eventually(func(g Gomega) {
			list := &batchv1.JobList{}
			g.Expect(k8sClient.List(ctx, list, crclient.InNamespace(ns), crclient.MatchingLabels{checkjob.LabelCheck: "pull"})).To(Succeed())
			for i := range list.Items {
				pulls[list.Items[i].Labels[checkjob.LabelNode]] = &list.Items[i]
			}
			g.Expect(pulls).To(HaveLen(2)) // worker-1 too: the removed check's drain was lifted
		}).WithTimeout(timeout).Should(Succeed())
		for _, w := range []string{"worker-0", "worker-1"} {
			pullBackOff(ctx, pulls[w])
		}
		Eventually(func(g Gomega) {
			out, err := cluster.Exec(context.Background(), "chk-login-0", "squeue", "-h", "-t", "all", "-o", "%i|%T")
			g.Expect(err).NotTo(HaveOccurred())
			for _, w := range []string{"worker-0", "worker-1"} {
				g.Expect(out).To(ContainSubstring(pulls[w].Labels[checkjob.LabelHolder]+"|CANCELLED"), "the holder of %s", w)
				err := k8sClient.Get(ctx, key(ns, pulls[w].Name), &batchv1.Job{})
				g.Expect(crclient.IgnoreNotFound(err)).To(Succeed())
				g.Expect(err).To(HaveOccurred(), "the Job of %s is still there", w)
			}
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx, list, crclient.InNamespace(ns))).To(Succeed())
			notRun := 0
			for _, e := range list.Items {
				if e.Reason == "ActiveCheckNotRun" {
					g.Expect(e.Note).To(MatchRegexp(`^check pull could not run on worker-[01]: its pod cannot start: ImagePullBackOff: Back-off pulling image "checker:missing"$`))
					notRun++
				}
			}
			g.Expect(notRun).To(Equal(2))
		}).WithTimeout(cancelWait).Should(Succeed())
		for _, w := range []string{"worker-0", "worker-1"} {
			n, err := client.Node(ctx, w)
			Expect(err).NotTo(HaveOccurred())
			Expect(n.Has("DRAIN")).To(BeFalse(), "%s: %s", w, n.Reason)
		}

		By("a check whose Job the API server refuses (a quota of no Jobs) drains nobody either, and does not wait out its holder")
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-jobs", Namespace: ns},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}}}
		Expect(k8sClient.Create(ctx, quota)).To(Succeed())
		// The quota controller's part: what is used (admission compares it with the hard limit).
		quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}}
		Expect(k8sClient.Status().Update(ctx, quota)).To(Succeed())
		updateSpec(ctx, ns, "chk", func(sc *slurmv1alpha1.SlurmCluster) {
			sc.Spec.ActiveChecks = []slurmv1alpha1.ActiveCheck{{Name: "refused", RunAs: slurmv1alpha1.ActiveCheckKubernetesJob, Script: "true"}}
		})
		Eventually(func(g Gomega) {
			list := &eventsv1.EventList{}
			g.Expect(k8sClient.List(ctx, list, crclient.InNamespace(ns))).To(Succeed())
			refused := map[string]bool{}
			for _, e := range list.Items {
				if e.Reason == "ActiveCheckNotRun" && strings.HasPrefix(e.Note, "check refused could not run on ") {
					g.Expect(e.Note).To(MatchRegexp(`^check refused could not run on worker-[01]: its Job was refused: jobs.batch "chk-check-[0-9]+" is forbidden: exceeded quota: no-jobs`))
					refused[e.Note[len("check refused could not run on "):][:len("worker-0")]] = true
				}
			}
			g.Expect(refused).To(HaveLen(2))
			out, err := cluster.Exec(context.Background(), "chk-login-0", "squeue", "-h", "-t", "all", "-n", "slurm-operator-check-refused", "-o", "%T")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Fields(out)).To(Equal([]string{"CANCELLED", "CANCELLED"})) // not waited out to TIMEOUT
		}).WithTimeout(cancelWait).Should(Succeed())
		for _, w := range []string{"worker-0", "worker-1"} {
			n, err := client.Node(ctx, w)
			Expect(err).NotTo(HaveOccurred())
			Expect(n.Has("DRAIN")).To(BeFalse(), "%s: %s", w, n.Reason)
		}
	})
})

// pullBackOff plays the kubelet for a check's Job whose image cannot be pulled: its pod waits.
func pullBackOff(ctx SpecContext, job *batchv1.Job) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x", Namespace: job.Namespace, Labels: job.Spec.Template.Labels},
		Spec:       job.Spec.Template.Spec,
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "check", Image: "checker:missing", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "checker:missing"`}}}}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
}

// endCheckJob plays the kubelet and the Job controller for a check's Job: its pod ended with
// this exit code and termination message, and the Job's conditions say so.
func endCheckJob(ctx SpecContext, job *batchv1.Job, exit int32, message string) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x", Namespace: job.Namespace, Labels: job.Spec.Template.Labels},
		Spec:       job.Spec.Template.Spec,
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	phase := corev1.PodSucceeded
	if exit != 0 {
		phase = corev1.PodFailed
	}
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "check", Image: "checker:1", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message, Reason: "Completed"}}}}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())

	start, end := metav1.NewTime(time.Now().Add(-10*time.Second)), metav1.Now()
	Expect(k8sClient.Get(ctx, key(job.Namespace, job.Name), job)).To(Succeed())
	job.Status.StartTime = &start
	if exit == 0 {
		job.Status.Succeeded, job.Status.CompletionTime = 1, &end
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: end},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end},
		}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, LastTransitionTime: end},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: "Job has reached the specified backoff limit", LastTransitionTime: end},
		}
	}
	Expect(k8sClient.Status().Update(ctx, job)).To(Succeed())
}
