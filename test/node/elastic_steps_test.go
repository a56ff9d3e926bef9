package node

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// checkElasticNodeSet adds an elastic CPU-only node set (autoscaling from 0 to 2 nodes) with a
// partition of its own: both nodes show in sinfo powered down with no pod; a two-node job makes
// Slurm power both up, the operator makes both pods on the kubelet and the job runs on them;
// once idle past the timeout both are powered down and their pods removed; then the set is
// removed. With the node's CPU taken by another pod, an ordinary user's job waits with
// Kubernetes' words on its node and on the job, and runs as the user once the CPU is freed;
// with the namespace's pod quota spent, a job waits with the API server's refusal there and in
// WorkersAvailable until the quota goes. No other pod is replaced or restarted on the way.
func (e *env) checkElasticNodeSet() {
	e.t.Helper()
	e.nodeSetSpoolVolumes("burst", 2)
	orig, _, withBurst := e.partitionsWith("burst")
	before := e.podsSnapshot()

	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", `{"spec":{"slurmNodes":{"nodeSets":[{"name":"burst","size":0,"gpu":0,`+
		`"autoscaling":{"enabled":true,"minSize":0,"maxSize":2,"idleTimeoutSeconds":20,"resumeTimeoutSeconds":300},`+
		`"resources":{"requests":{"cpu":"50m","memory":"256Mi"},"limits":{"cpu":"1","memory":"3Gi"}}}]},"slurmConfig":{"partitions":`+withBurst+`}}}`)
	removePatch := `{"spec":{"slurmNodes":{"nodeSets":null},"slurmConfig":{"partitions":` + orig + `}}}`
	pods := func() string {
		out, _ := e.kubectl("get", "pods", "-n", ns, "-l", slurmv1alpha1.LabelNodeSet+"=burst", "-o", "name")
		return strings.TrimSpace(out)
	}
	gone := e.nodeSetGone("burst")
	removed := false
	defer e.removeNodeSetUnless(&removed, removePatch, gone)
	// 1. The capacity, with no pod.
	e.waitFor(3*time.Minute, "burst-0 and burst-1 powered down in partition burst", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sinfo -h -p burst -N -o '%N %t' | sort -u")
		return strings.TrimSpace(out) == "burst-0 idle~\nburst-1 idle~", out
	})
	if p := pods(); p != "" {
		e.t.Fatalf("pods of the elastic set before any job:\n%s", p)
	}
	if out, err := e.sshErr(e.login, "sbatch -p burst -N3 --wrap true"); err == nil || !strings.Contains(out, "Requested node configuration is not available") {
		e.t.Errorf("sbatch -N3 on a set of at most two: %v\n%s", err, out)
	}
	// 2. A two-node job from zero pods.
	submitted := time.Now()
	job := strings.TrimSpace(e.onLogin("sbatch --parsable -p burst -N2 -o /tmp/burst-%j.out --wrap 'srun hostname'"))
	e.waitFor(5*time.Minute, "job "+job+" running on both nodes", func() (bool, string) {
		out, _ := e.sshErr(e.login, "squeue -h -j "+job+" -o '%T %N'")
		return strings.TrimSpace(out) == "RUNNING burst-[0-1]" || strings.Contains(e.sacctState(job), "COMPLETED"), out + pods()
	})
	e.t.Logf("elastic set: sbatch -N2 from zero pods to running: %.1fs", time.Since(submitted).Seconds())
	e.waitJobInSacct(job, "COMPLETED")
	// 3. Idle past the timeout: powered down, pods removed.
	e.waitFor(3*time.Minute, "both burst pods removed and both nodes powered down", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sinfo -h -p burst -N -o '%N %t' | sort -u")
		p := pods()
		return p == "" && strings.TrimSpace(out) == "burst-0 idle~\nburst-1 idle~", out + p
	})
	e.t.Logf("elastic set: sbatch to both pods removed and both nodes powered down (idle timeout 20 s, SuspendTimeout 30 s): %.1fs", time.Since(submitted).Seconds())
	for _, n := range []string{"burst-0", "burst-1"} {
		if out := e.onLogin("scontrol show node " + n); strings.Contains(out, "DRAIN") {
			e.t.Errorf("%s is drained after its power-down:\n%s", n, out)
		}
	}
	// 3b. No room in Kubernetes: a pod takes the node's unrequested CPU, so the next burst pod
	// cannot be placed. An ordinary user's job waits CONFIGURING, burst-0's Slurm comment
	// carries the scheduler's words, and the job runs as the user once the CPU is freed; the
	// comment goes.
	e.onLogin(`id burst >/dev/null 2>&1 || adduser --disabled-password --comment "" burst >/dev/null`)
	release := e.takeFreeCPU("burst-hog")
	defer release()
	job = strings.TrimSpace(e.onLogin(`su burst -c "cd && sbatch --parsable -p burst -N1 -o burst-%j.out --wrap 'srun id -un'"`))
	e.waitFor(2*time.Minute, "burst-0 commented with the scheduler's words, job "+job+" configuring", func() (bool, string) {
		node, _ := e.sshErr(e.login, "scontrol show node burst-0")
		show, _ := e.sshErr(e.login, "scontrol show job "+job)
		return strings.Contains(node, "Comment=slurm-operator: pod cannot start: Unschedulable: ") && strings.Contains(node, "Insufficient cpu") &&
			strings.Contains(show, "JobState=CONFIGURING ") && strings.Contains(show, "AdminComment=slurm-operator: waits for the pod of burst-0: Unschedulable: ") &&
			strings.Contains(show, "Insufficient cpu"), node + show + pods()
	})
	// The user who submitted the job reads why it waits from their own shell.
	if out, err := e.sshErr(e.login, `su burst -c "scontrol show job `+job+`"`); err != nil || !strings.Contains(out, "AdminComment=slurm-operator: waits for the pod of burst-0: ") {
		e.t.Errorf("the user's own view of their waiting job (%v) lacks the reason:\n%s", err, out)
	}
	freed := time.Now()
	release()
	e.waitJobInSacct(job, "COMPLETED")
	e.t.Logf("elastic set: CPU freed to the waiting job completed: %.1fs", time.Since(freed).Seconds())
	if out := e.onLogin("sacct -n -X -P -o User -j " + job + "; cat ~burst/burst-" + job + ".out"); strings.TrimSpace(out) != "burst\nburst" {
		e.t.Errorf("the user's job on the elastic set: sacct's user, then what srun id -un printed:\n%s\nwant burst twice", out)
	}
	if out := e.onLogin("sacct -n -X -P -o AdminComment -j " + job); !strings.HasPrefix(out, "slurm-operator: waits for the pod of burst-0: Unschedulable: ") {
		e.t.Errorf("sacct keeps no record of what the job waited for: %q", out)
	}
	e.waitFor(time.Minute, "burst-0's comment gone once its pod started", func() (bool, string) {
		node, _ := e.sshErr(e.login, "scontrol show node burst-0")
		return !strings.Contains(node, "pod cannot start"), node
	})
	// 3c. Kubernetes refuses the pod: a ResourceQuota allows the namespace no more pods than it
	// has. A two-node job waits CONFIGURING, the node whose pod was refused carries the API
	// server's words as its comment, WorkersAvailable says WorkerPodsRefused with them, and the
	// job runs once the quota goes.
	e.checkQuotaRefusesABurstPod(pods)
	// 4. The set removed.
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", removePatch)
	removed = true
	e.waitFor(3*time.Minute, "the set's StatefulSet gone and its nodes gone from sinfo", gone)
	after := e.podsSnapshot()
	for name, was := range before {
		if after[name] != was {
			e.t.Errorf("pod %s was replaced or restarted: %q, then %q", name, was, after[name])
		}
	}
}

// checkQuotaRefusesABurstPod is step 3c of checkElasticNodeSet.
func (e *env) checkQuotaRefusesABurstPod(pods func() string) {
	e.t.Helper()
	var list corev1.PodList
	if err := json.Unmarshal([]byte(e.kubectlOK("get", "pods", "-n", ns, "-o", "json")), &list); err != nil {
		e.t.Fatal(err)
	}
	used := 0
	for _, p := range list.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			used++
		}
	}
	e.sh(fmt.Sprintf(`{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"burst-quota","namespace":%q},"spec":{"hard":{"pods":"%d"}}}`, ns, used),
		filepath.Join(e.assets, "kubectl"), "apply", "-f", "-")
	lift := func() { e.kubectlOK("delete", "resourcequota", "-n", ns, "burst-quota", "--ignore-not-found") }
	defer lift()
	// The quota's own count is what admission compares: once it has one, the limit is set to
	// it, so that no pod more fits whatever ended between the count above and the quota's.
	e.waitFor(time.Minute, "the quota full", func() (bool, string) {
		out, _ := e.kubectl("get", "resourcequota", "-n", ns, "burst-quota", "-o", "jsonpath={.status.used.pods} {.status.hard.pods}")
		counted, limit, _ := strings.Cut(out, " ")
		if counted != "" && counted != limit {
			e.kubectlOK("patch", "resourcequota", "-n", ns, "burst-quota", "--type=merge", "-p", `{"spec":{"hard":{"pods":"`+counted+`"}}}`)
		}
		return counted != "" && counted == limit, out
	})
	job := strings.TrimSpace(e.onLogin("sbatch --parsable -p burst -N2 -o /tmp/burst-%j.out --wrap 'srun hostname'"))
	e.waitFor(2*time.Minute, "a burst node commented with the quota's refusal, WorkersAvailable=WorkerPodsRefused, job "+job+" configuring", func() (bool, string) {
		nodes, _ := e.sshErr(e.login, "sinfo -h -p burst -N -O NodeList:10,Comment:300")
		cond, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="WorkersAvailable")].reason} {.status.conditions[?(@.type=="WorkersAvailable")].message}`)
		show, _ := e.sshErr(e.login, "scontrol show job "+job)
		quota := "exceeded quota: burst-quota"
		commented := strings.Contains(nodes, "slurm-operator: pod cannot start: FailedCreate: pods ") && strings.Contains(nodes, quota)
		named := strings.HasPrefix(cond, "WorkerPodsRefused ") && strings.Contains(cond, "cannot be created: pods ") && strings.Contains(cond, quota)
		waits := strings.Contains(show, "JobState=CONFIGURING ") && strings.Contains(show, "AdminComment=slurm-operator: waits for the pod of burst-") && strings.Contains(show, quota)
		return commented && named && waits, nodes + cond + "\n" + show + pods()
	})
	if out := e.kubectlOK("get", "events", "-n", ns, "--field-selector", "reason=WorkerPodRefused", "-o", "jsonpath={.items[*].note}{.items[*].message}"); !strings.Contains(out, "exceeded quota: burst-quota") {
		e.t.Errorf("no WorkerPodRefused event gives the quota's words: %q", out)
	}
	lifted := time.Now()
	lift()
	// The StatefulSet controller retries on its own backoff, which grows with each refusal.
	e.waitFor(4*time.Minute, "job "+job+" COMPLETED once the quota is lifted", func() (bool, string) {
		state := e.sacctState(job)
		return state == "COMPLETED", state
	})
	e.t.Logf("elastic set: quota lifted to the refused job completed: %.1fs", time.Since(lifted).Seconds())
	e.waitFor(time.Minute, "WorkersAvailable true and the comments gone once the pods exist", func() (bool, string) {
		nodes, err := e.sshErr(e.login, "sinfo -h -p burst -N -O NodeList:10,Comment:300")
		cond, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="WorkersAvailable")].status}`)
		listed := err == nil && strings.Contains(nodes, "burst-0") && strings.Contains(nodes, "burst-1")
		return listed && !strings.Contains(nodes, "pod cannot start") && cond == "True", nodes + cond
	})
}

// sacctState is the job's state in sacct ("" when sacct does not answer).
func (e *env) sacctState(id string) string {
	out, _ := e.sshErr(e.login, "sacct -n -X -P -o State -j "+id)
	return strings.TrimSpace(out)
}

// takeFreeCPU starts a pod (name) that requests all but 10m of the CPU the node's pods have not
// requested, so that no further pod asking more than that fits; the returned func deletes it
// and waits until it is gone.
func (e *env) takeFreeCPU(name string) func() {
	e.t.Helper()
	var nodes corev1.NodeList
	if err := json.Unmarshal([]byte(e.kubectlOK("get", "nodes", "-o", "json")), &nodes); err != nil || len(nodes.Items) != 1 {
		e.t.Fatalf("the one node: %v (%d nodes)", err, len(nodes.Items))
	}
	node := nodes.Items[0]
	var pods corev1.PodList
	if err := json.Unmarshal([]byte(e.kubectlOK("get", "pods", "-A", "--field-selector", "spec.nodeName="+node.Name, "-o", "json")), &pods); err != nil {
		e.t.Fatal(err)
	}
	free := node.Status.Allocatable.Cpu().MilliValue()
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		var sum, initMax int64
		for _, c := range p.Spec.Containers {
			sum += c.Resources.Requests.Cpu().MilliValue()
		}
		for _, c := range p.Spec.InitContainers {
			initMax = max(initMax, c.Resources.Requests.Cpu().MilliValue())
		}
		free -= max(sum, initMax)
	}
	if free <= 10 {
		e.t.Fatalf("the node has only %dm of CPU unrequested: nothing to take", free)
	}
	manifest := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q},"spec":{"nodeName":%q,`+
		`"containers":[{"name":"hog","image":"docker.io/slurm-k8s-test/pause:1","imagePullPolicy":"Never","resources":{"requests":{"cpu":"%dm"}}}]}}`,
		name, ns, node.Name, free-10)
	e.sh(manifest, filepath.Join(e.assets, "kubectl"), "apply", "-f", "-")
	e.waitFor(time.Minute, name+" running", func() (bool, string) {
		out, _ := e.kubectl("get", "pod", "-n", ns, name, "-o", "jsonpath={.status.phase}")
		return out == "Running", out
	})
	return func() {
		e.kubectlOK("delete", "pod", "-n", ns, name, "--wait=true", "--grace-period=0", "--ignore-not-found")
	}
}
