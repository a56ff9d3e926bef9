package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/syncbuf"
)

// TestSlurmClusterOnSeveralNodes runs the product on a three-node Kubernetes (hack/node.sh with
// NODE_WORKERS=2): the controller, accounting, login nodes and exporter on the control-plane
// node, one worker on each worker node (one stand-in GPU each), so that srun, MPI and ssh cross
// the pod network between nodes; then the faults only several nodes show, each with the
// outcome it must have written before it is caused.
func TestSlurmClusterOnSeveralNodes(t *testing.T) {
	e := startNode(t, "NODE_WORKERS=2", "NODE_FAKE_GPUS=1")
	if !t.Run("install on three nodes: the services on the control-plane node, the workers on the GPU nodes", func(t *testing.T) {
		e := e.with(t)
		e.installAll("values-nodes.yaml")
	}) {
		t.FailNow()
	}
	e.login = strings.TrimSpace(e.kubectlOK("get", "service", cluster+"-login", "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
	workerNodes := strings.Fields(e.sh("", "hack/node.sh", "nodes"))
	if len(workerNodes) != 2 {
		t.Fatalf("hack/node.sh nodes: %q, want two worker nodes", workerNodes)
	}

	t.Run("each worker runs on a worker node of its own; every other pod on the control-plane node", func(t *testing.T) {
		e := e.with(t)
		out := e.kubectlOK("get", "pods", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}`)
		seen := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				t.Fatalf("pod without a node:\n%s", out)
			}
			seen[f[0]] = f[1]
			if strings.HasPrefix(f[0], cluster+"-worker-") {
				continue
			}
			if f[1] != "slurm-test-node" {
				t.Errorf("%s runs on %s, want the control-plane node", f[0], f[1])
			}
		}
		w0, w1 := seen[cluster+"-worker-0"], seen[cluster+"-worker-1"]
		if w0 == w1 || !strings.HasPrefix(w0, "slurm-test-node-") || !strings.HasPrefix(w1, "slurm-test-node-") {
			t.Errorf("the workers run on %q and %q, want one on each worker node", w0, w1)
		}
		e.installStandInNvidiaSMI()
	})

	// The document's workflows, across the pod network between nodes.
	t.Run("ssh -J through the login Service reaches worker-1 on its node", func(t *testing.T) { e.with(t).checkSSHJump() })
	t.Run("srun --nodes=2 --gres=gpu:1 nvidia-smi -L lists one GPU on each worker node", func(t *testing.T) { e.with(t).checkTwoNodeGPUs() })
	t.Run("the minGPT-style sbatch trains on two nodes and writes log.out to the shared root", func(t *testing.T) { e.with(t).checkMinGPT() })
	t.Run("a two-node MPI program over PMIx allreduces across the worker nodes", func(t *testing.T) { e.with(t).checkMPI() })
	t.Run("a user added with adduser runs srun -N2 across the worker nodes as themselves and ssh's to worker-1", func(t *testing.T) { e.with(t).checkUserJobs() })
	t.Run("a two-node srun's time from the login node, across nodes", func(t *testing.T) { e.with(t).logTwoNodeStart("workers on two nodes") })
	t.Run("a block topology from the worker nodes' rack labels: a block per node, a relabel followed, no pod replaced", func(t *testing.T) { e.with(t).checkTopology() })
	t.Run("active checks as the operator's jobs: the MPI all-reduce across the worker nodes and the jail's write check pass on both workers", func(t *testing.T) { e.with(t).checkActiveChecks() })
	t.Run("a check run as a Kubernetes Job: its pods run on the workers' own nodes while Slurm jobs hold the workers, and the failing worker alone is drained with the pod's output", func(t *testing.T) {
		e.with(t).checkActiveCheckInPods()
	})

	t.Run("a worker node cut off for less than SlurmdTimeout: its job keeps running and completes, the node never goes down, the pod stays", func(t *testing.T) {
		e := e.with(t)
		node := e.nodeOf("worker-1")
		id := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-1 -J cut --wrap 'sleep 40'"))
		e.waitJobState(id, "RUNNING")
		before := e.podsSnapshot()[cluster+"-worker-1"]
		e.sh("", "hack/node.sh", "cut", node, "15")
		// The cut is real: nothing reaches the worker through the login node meanwhile.
		if out, err := e.sshJump("worker-1", "true"); err == nil {
			t.Errorf("ssh to worker-1 went through while its node was cut off:\n%s", out)
		}
		e.waitFor(time.Minute, "the cut mended", func() (bool, string) {
			out, err := e.sshJump("worker-1", "echo reached")
			return err == nil && strings.TrimSpace(out) == "reached", out
		})
		if state, reason := e.slurmState("worker-1"); strings.Contains(state, "DOWN") {
			t.Errorf("worker-1 after a cut shorter than SlurmdTimeout: %s %s", state, reason)
		}
		e.waitFor(2*time.Minute, "job "+id+" COMPLETED", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+id+" -o State,ExitCode")
			return strings.TrimSpace(out) == "COMPLETED|0:0", out
		})
		if after := e.podsSnapshot()[cluster+"-worker-1"]; after != before {
			t.Errorf("worker-1's pod (uid, restarts) was %q, is %q: a short cut must not replace or restart it", before, after)
		}
		// Looked at again past SlurmdTimeout from the cut's start (the job took 40 s): a node
		// slurmctld had missed would be down by now.
		if state, reason := e.slurmState("worker-1"); state != "IDLE" {
			t.Errorf("worker-1 after the cut and its job, past SlurmdTimeout: %s %s, want IDLE", state, reason)
		}
	})

	t.Run("kubectl drain of a worker's node while it runs a job: eviction refused until the job ends, then the drain completes; uncordoned, the worker takes jobs again", func(t *testing.T) {
		e := e.with(t)
		node := e.nodeOf("worker-0")
		id := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-0 -J drained --wrap 'sleep 45'"))
		e.waitJobState(id, "RUNNING")
		e.waitFor(time.Minute, "worker-0 labelled busy", func() (bool, string) {
			out, _ := e.kubectl("get", "pod", cluster+"-worker-0", "-n", ns, "-o", `jsonpath={.metadata.labels.slurm\.hpc\.dev/busy}`)
			return out == "true", out
		})
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		var drainOut syncbuf.Buffer
		done := make(chan error, 1)
		go func() {
			out, err := e.run(ctx, "", filepath.Join(e.assets, "kubectl"), "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=4m")
			_, _ = drainOut.Write([]byte(out))
			done <- err
		}()
		defer e.kubectl("uncordon", node) //nolint:errcheck // best effort when the step failed
		time.Sleep(20 * time.Second)
		select {
		case err := <-done:
			t.Fatalf("kubectl drain returned while the job ran: %v\n%s", err, drainOut.String())
		default:
		}
		if del, _ := e.kubectl("get", "pod", cluster+"-worker-0", "-n", ns, "-o", "jsonpath={.metadata.deletionTimestamp}"); del != "" {
			t.Errorf("worker-0 is being deleted while its job runs (since %s)", del)
		}
		e.waitJobState(id, "RUNNING")
		e.waitFor(2*time.Minute, "job "+id+" COMPLETED", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+id+" -o State,ExitCode")
			return strings.TrimSpace(out) == "COMPLETED|0:0", out
		})
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("kubectl drain after the job: %v\n%s", err, drainOut.String())
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("kubectl drain did not complete within 2 minutes of the job's end:\n%s", drainOut.String())
		}
		if !strings.Contains(drainOut.String(), "disruption budget") {
			t.Errorf("kubectl drain never met the busy budget:\n%s", drainOut.String())
		}
		e.kubectlOK("uncordon", node)
		e.waitWorkerBack("worker-0")
	})

	t.Run("a worker node lost under two jobs: Slurm sets it down, ends the one that may not be requeued NODE_FAIL and requeues the other, the status names the node; back, the worker runs the requeued job", func(t *testing.T) {
		e := e.with(t)
		node := e.nodeOf("worker-1")
		once := strings.TrimSpace(e.onLogin("sbatch --parsable --no-requeue -w worker-1 -J lost-once --wrap 'sleep 600'"))
		again := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-1 -J lost-again --wrap 'sleep 20'"))
		e.waitJobState(once, "RUNNING")
		e.waitJobState(again, "RUNNING")
		e.sh("", "hack/node.sh", "kill", node)
		started := false
		defer func() {
			if !started {
				e.run(context.Background(), "", "hack/node.sh", "start", node) //nolint:errcheck // best effort when the step failed
			}
		}()
		e.waitFor(2*time.Minute, "worker-1 down in Slurm with a reason", func() (bool, string) {
			state, reason := e.slurmState("worker-1")
			return strings.Contains(state, "DOWN") && reason != "", state + " " + reason
		})
		e.waitFor(time.Minute, "job "+once+" NODE_FAIL", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+once+" -o State")
			return strings.TrimSpace(out) == "NODE_FAIL", out
		})
		e.waitFor(time.Minute, "job "+again+" requeued, pending", func() (bool, string) {
			out, _ := e.sshErr(e.login, "scontrol show job -o "+again)
			return strings.Contains(out, "JobState=PENDING") && strings.Contains(out, "Restarts=1"), out
		})
		e.waitFor(3*time.Minute, "WorkersAvailable names the lost node "+node, func() (bool, string) {
			out, _ := e.kubectl("get", "slurmcluster", cluster, "-n", ns, "-o",
				`jsonpath={.status.conditions[?(@.type=="WorkersAvailable")].reason}: {.status.conditions[?(@.type=="WorkersAvailable")].message}`)
			return strings.HasPrefix(out, "WorkerNodeUnhealthy: ") && strings.Contains(out, "pod "+cluster+"-worker-1: Kubernetes node "+node+" is not ready"), out
		})
		e.sh("", "hack/node.sh", "start", node)
		started = true
		e.waitFor(5*time.Minute, "job "+again+" COMPLETED after the node came back", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+again+" -o State,ExitCode")
			return strings.TrimSpace(out) == "COMPLETED|0:0", out
		})
		e.waitWorkerBack("worker-1")
		// Both workers' pods have new addresses now (worker-0's was replaced by the drain,
		// worker-1's sandbox made again): past three times SlurmdTimeout, slurmctld still
		// reaches both and launches jobs there.
		e.checkNodesHealAfterTimeout("worker-0", "worker-1")
	})

	// Last: it leaves a node out of service.
	t.Run("the controller's node lost: declared out of service, slurmctld comes back on another node from its spool claim with the running and the queued job", func(t *testing.T) {
		e := e.with(t)
		// slurmctld moves to the GPU nodes (its filter changed as with kubectl edit): a
		// controller rescheduled to another node reads its state from the claim.
		held := strings.TrimSpace(e.onLogin("sbatch --parsable --hold -J held --wrap true"))
		e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", `{"spec":{"slurmNodes":{"controller":{"k8sNodeFilterName":"gpu"}}}}`)
		e.waitFor(3*time.Minute, "slurmctld on a GPU node", func() (bool, string) {
			out, _ := e.kubectl("get", "pod", cluster+"-controller-0", "-n", ns, "-o", `jsonpath={.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status}`)
			return strings.HasPrefix(out, "slurm-test-node-") && strings.HasSuffix(out, " True"), out
		})
		lost := e.nodeOf("controller-0")
		survivor := "worker-0"
		if e.nodeOf("worker-0") == lost {
			survivor = "worker-1"
		}
		e.waitFor(2*time.Minute, "slurmctld answering, job "+held+" still held", func() (bool, string) {
			out, _ := e.sshErr(e.login, "squeue -h -j "+held+" -o '%T %r'")
			return strings.TrimSpace(out) == "PENDING JobHeldUser", out
		})
		// The job runs until the test lets it end (a file in the shared root), not for a fixed
		// time: however long the controller takes to come back, the job is still running then.
		running := strings.TrimSpace(e.onLogin("mkdir -p /shared && sbatch --parsable -w " + survivor + " -J outlives-ctld --wrap 'until [ -e /shared/release-$SLURM_JOB_ID ]; do sleep 1; done'"))
		e.waitJobState(running, "RUNNING")
		// slurmctld writes its state some time after a change, not at once: a job that started
		// just before slurmctld dies is read back PENDING and killed when its node registers
		// (seen here: "Registered PENDING JobId=… on node", then "Job credential revoked"). A
		// job's update makes slurmctld save every job's state: lose the node once job_state is
		// written after an update made when the job was seen running.
		asked := time.Now()
		e.onLogin("scontrol update jobid=" + running + " comment=running-before-the-loss")
		e.waitFor(time.Minute, "slurmctld's job state saved after job "+running+" started", func() (bool, string) {
			fi, err := os.Stat(filepath.Join(hostVolume("controller-spool"), "job_state"))
			if err != nil {
				return false, err.Error()
			}
			return fi.ModTime().After(asked), "job_state written " + fi.ModTime().String()
		})

		e.sh("", "hack/node.sh", "kill", lost)
		e.waitFor(2*time.Minute, lost+" not ready", func() (bool, string) {
			out, _ := e.kubectl("get", "node", lost, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			return strings.TrimSpace(out) != "True", out
		})
		// The admin declares the node gone, as docs/reliability.md says: Kubernetes deletes its
		// pods and the StatefulSet makes slurmctld again elsewhere.
		e.kubectlOK("taint", "node", lost, "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")
		e.waitFor(4*time.Minute, "slurmctld ready on another node", func() (bool, string) {
			out, _ := e.kubectl("get", "pod", cluster+"-controller-0", "-n", ns, "-o", `jsonpath={.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status}`)
			return strings.HasPrefix(out, "slurm-test-node-") && !strings.HasPrefix(out, lost+" ") && strings.HasSuffix(out, " True"), out
		})
		e.waitFor(2*time.Minute, "the running and the held job kept by the new slurmctld", func() (bool, string) {
			out, _ := e.sshErr(e.login, "squeue -h -j "+running+","+held+" -o '%i %T' | sort")
			want := []string{running + " RUNNING", held + " PENDING"}
			sort.Strings(want)
			return strings.TrimSpace(out) == strings.Join(want, "\n"), out
		})
		e.onLogin("touch /shared/release-" + running)
		e.waitFor(3*time.Minute, "job "+running+" COMPLETED", func() (bool, string) {
			out, _ := e.sshErr(e.login, "sacct -n -P -X -j "+running+" -o State,ExitCode")
			return strings.TrimSpace(out) == "COMPLETED|0:0", out
		})
		if out, err := e.sshErr(e.login, "timeout 60 sbatch --wait -w "+survivor+" -o /dev/null --wrap true && echo ran"); err != nil || !strings.HasSuffix(strings.TrimSpace(out), "ran") {
			t.Errorf("a batch job on %s under the new slurmctld: %v\n%s", survivor, err, out)
		}
	})
}

// nodeOf is the Kubernetes node a worker's (or controller-0's) pod runs on.
func (e *env) nodeOf(worker string) string {
	e.t.Helper()
	node := strings.TrimSpace(e.kubectlOK("get", "pod", cluster+"-"+worker, "-n", ns, "-o", "jsonpath={.spec.nodeName}"))
	if node == "" {
		e.t.Fatalf("%s has no node", worker)
	}
	return node
}

// waitWorkerBack waits until the worker's pod is ready and Slurm has it idle, then runs a batch
// job there.
func (e *env) waitWorkerBack(worker string) {
	e.t.Helper()
	e.kubectlOK("wait", "pod", cluster+"-"+worker, "-n", ns, "--for=condition=Ready", "--timeout=4m")
	e.waitFor(4*time.Minute, worker+" idle in Slurm", func() (bool, string) {
		state, reason := e.slurmState(worker)
		return state == "IDLE", state + " " + reason
	})
	if out, err := e.sshErr(e.login, fmt.Sprintf("timeout 60 sbatch --wait -w %s -o /dev/null --wrap true && echo ran", worker)); err != nil || !strings.HasSuffix(strings.TrimSpace(out), "ran") {
		e.t.Errorf("a batch job on %s: %v\n%s", worker, err, out)
	}
}
