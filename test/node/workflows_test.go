package node

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
)

// The user document's workflows that both node tests run: on one node, and with the workers on
// nodes of their own.

// checkSSHJump: `ssh -J root@<login Service> root@<node>` reaches login-1 and worker-1 by their
// Slurm names.
func (e *env) checkSSHJump() {
	t := e.t
	t.Helper()
	for node, host := range map[string]string{"login-0": cluster + "-login-0", "login-1": cluster + "-login-1", "worker-1": cluster + "-worker-1"} {
		out, err := e.sshJump(node, "hostname")
		if err != nil || strings.TrimSpace(out) != host {
			t.Errorf("ssh -J root@<login Service> root@%s hostname: %v %q, want %q", node, err, out, host)
		}
	}
}

// checkTwoNodeGPUs: srun --nodes=2 --gres=gpu:1 nvidia-smi -L lists one GPU on each worker.
func (e *env) checkTwoNodeGPUs() {
	t := e.t
	t.Helper()
	out := e.onLogin("srun --nodes=2 --gres=gpu:1 nvidia-smi -L | sort")
	want := "GPU 0: Stand-In GPU (UUID: GPU-" + cluster + "-worker-0-0)\nGPU 0: Stand-In GPU (UUID: GPU-" + cluster + "-worker-1-0)"
	if strings.TrimSpace(out) != want {
		t.Fatalf("srun --nodes=2 --gres=gpu:1 nvidia-smi -L:\n%s\nwant:\n%s", out, want)
	}
}

// checkEachWorkersOwnGPU: the node has three stand-in GPUs and a device plugin
// (test/node/gpuplugin); each one-GPU worker's pod was given one of them, named in its
// NVIDIA_VISIBLE_DEVICES. A job on each worker sees that device file and no other (the same
// device numbers), slurmd offers that file alone, and the two workers' GPUs differ.
func (e *env) checkEachWorkersOwnGPU() {
	t := e.t
	t.Helper()
	out := e.onLogin(`srun -N2 --gres=gpu:1 sh -c 'echo "$(hostname) visible=$CUDA_VISIBLE_DEVICES $(stat -c "%n=%t:%T" /dev/nvidia[0-9]*)"' | sort`)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("srun -N2 --gres=gpu:1 printed:\n%s", out)
	}
	seen := map[string]string{}
	for i, l := range lines {
		pod := fmt.Sprintf("%s-worker-%d", cluster, i)
		given := strings.TrimSpace(e.kubectlOK("exec", "-n", ns, pod, "-c", "slurmd", "--", "printenv", "NVIDIA_VISIBLE_DEVICES"))
		want := fmt.Sprintf("%s visible=0 /dev/nvidia%s=c3:%x", pod, given, atoi(t, given))
		if l != want {
			t.Errorf("a job on %s (its pod given GPU %s by the device plugin) saw %q, want %q", pod, given, l, want)
		}
		if other, ok := seen[given]; ok {
			t.Errorf("%s and %s were both given GPU %s", other, pod, given)
		}
		seen[given] = pod
		gres := e.kubectlOK("exec", "-n", ns, pod, "-c", "slurmd", "--", "cat", "/run/slurm-operator/gres.conf")
		if !strings.Contains(gres, "File=/dev/nvidia"+given+"\n") || strings.Count(gres, "File=") != 1 {
			t.Errorf("%s's gres.conf lines:\n%s", pod, gres)
		}
	}
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

// checkMinGPT: the document's minGPT-style sbatch trains on two nodes with srun and writes
// log.out in the shared root; squeue, scontrol and sacct show it.
func (e *env) checkMinGPT() {
	t := e.t
	t.Helper()
	dir := "/shared/examples/distributed/minGPT-ddp"
	e.onLogin("mkdir -p " + dir + "/mingpt/slurm && cd " + dir +
		" && cat > mingpt/main.py <<'PY'\n" + trainPy + "PY\ncat > mingpt/slurm/sbatch_run.sh <<'SB'\n" + sbatchRun(dir) + "SB\n")
	id := strings.TrimSpace(e.onLogin("cd " + dir + " && sbatch --parsable mingpt/slurm/sbatch_run.sh"))
	e.waitFor(time.Minute, "job "+id+" in squeue or done", func() (bool, string) {
		out, _ := e.sshErr(e.login, "squeue -h -j "+id+" -o '%i %T %D'; sacct -n -X -P -j "+id+" -o State")
		return strings.Contains(out, id+" RUNNING 2") || strings.Contains(out, "COMPLETED"), out
	})
	show := e.onLogin("scontrol show job " + id)
	if !strings.Contains(show, "NumNodes=2") || !strings.Contains(show, "JobName=mingpt") {
		t.Errorf("scontrol show job %s:\n%s", id, show)
	}
	e.waitFor(3*time.Minute, "job "+id+" COMPLETED in sacct", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sacct -n -P -j "+id+" -o JobID,State,ExitCode,NNodes")
		return strings.Contains(out, id+"|COMPLETED|0:0|2") && strings.Contains(out, id+".0|COMPLETED|0:0|2"), out
	})
	log := e.onLogin("cat " + dir + "/log.out")
	for _, want := range []string{"rank 0 of 2 on " + cluster + "-worker-0", "rank 1 of 2 on " + cluster + "-worker-1", "rank 0: done, loss"} {
		if !strings.Contains(log, want) {
			t.Errorf("want %q in log.out:\n%s", want, log)
		}
	}
}

// checkMPI: srun starts a two-node MPI program, with and without PMIx: mpi4py ranks 0 and 1 of
// 2 allreduce across the workers.
func (e *env) checkMPI() {
	t := e.t
	t.Helper()
	e.onLogin("cat > /root/mpi_hello.py <<'EOF'\n" + slurmtest.MPIHello + "\nEOF")
	for _, cmd := range []string{"srun -N2 --ntasks-per-node=1 python3 /root/mpi_hello.py", "srun --mpi=pmix -N2 --ntasks-per-node=1 python3 /root/mpi_hello.py"} {
		out := e.onLogin(cmd + " | sort")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "0 2 1 "+cluster+"-worker-") || !strings.HasPrefix(lines[1], "1 2 1 "+cluster+"-worker-") ||
			strings.Fields(lines[0])[3] == strings.Fields(lines[1])[3] {
			t.Errorf("%s:\n%s\nwant ranks 0 and 1 of 2 on two workers, each with the sum 1", cmd, out)
		}
	}
}

// logTwoNodeStart logs how long a two-node `srun true` takes from the login node, start to
// end (its allocation, launch on both nodes and teardown), as the median of five, timed on the
// login node so that ssh is not counted, once the queue is empty. It asserts only that each run
// succeeds: the figure is for docs/performance.md.
func (e *env) logTwoNodeStart(where string) {
	t := e.t
	t.Helper()
	// Timed on idle nodes: a job left by an earlier step would add its queue wait.
	e.waitFor(time.Minute, "no job in the queue", func() (bool, string) {
		out, err := e.sshErr(e.login, "squeue -h")
		return err == nil && strings.TrimSpace(out) == "", out
	})
	// Each run starts once the last one's nodes are free again (srun returns before Slurm
	// has finished with them).
	out := e.onLogin(`for i in 1 2 3 4 5; do while [ -n "$(squeue -h)" ]; do sleep 0.2; done; s=$(date +%s%N); srun -N2 true 2>/dev/null || exit 1; echo $(( ($(date +%s%N) - s) / 1000000 )); done`)
	var ms []int
	for _, f := range strings.Fields(out) {
		var v int
		if _, err := fmt.Sscan(f, &v); err != nil {
			t.Fatalf("srun -N2 true, timed: %q", out)
		}
		ms = append(ms, v)
	}
	if len(ms) != 5 {
		t.Fatalf("srun -N2 true, timed five times: %q", out)
	}
	sort.Ints(ms)
	t.Logf("a two-node srun true from the login node, %s: median %d ms of 5 (%v)", where, ms[2], ms)
}

// checkUserJobs: a user added with adduser on a login node logs in with their own key, has one
// home on every node, runs srun -N2 as themselves, and ssh's to worker-1 with a key of their own.
func (e *env) checkUserJobs() {
	t := e.t
	t.Helper()
	key := filepath.Join(t.TempDir(), "alice")
	pub := writeKey(t, key)
	e.onLogin(fmt.Sprintf(`adduser --disabled-password --comment "" alice >/dev/null &&
install -d -m 0700 -o alice -g alice /home/alice/.ssh &&
echo %q > /home/alice/.ssh/authorized_keys && chown alice:alice /home/alice/.ssh/authorized_keys && chmod 0600 /home/alice/.ssh/authorized_keys`, pub))
	out, err := e.sshAs(key, "alice@"+e.login, `id -un; srun -N2 sh -c 'echo "$(id -un) $(hostname) $HOME $(stat -c %U $HOME)"' | sort`)
	if err != nil {
		t.Fatalf("alice: %v\n%s", err, out)
	}
	want := "alice\nalice " + cluster + "-worker-0 /home/alice alice\nalice " + cluster + "-worker-1 /home/alice alice"
	if strings.TrimSpace(out) != want {
		t.Fatalf("alice's session and jobs:\n%s\nwant:\n%s", out, want)
	}
	// Within the cluster, alice uses a key of her own (her home is the same on every node). On a
	// worker where she has no job, pam_slurm_adopt refuses her.
	out, err = e.sshAs(key, "alice@"+e.login, `ssh-keygen -q -t ed25519 -N "" -f ~/.ssh/id_ed25519 && cat ~/.ssh/id_ed25519.pub >> ~/.ssh/authorized_keys &&
ssh -o StrictHostKeyChecking=accept-new -o BatchMode=yes worker-1 'id -un; hostname' 2>&1`)
	// pam_slurm_adopt's words: the first when some job runs on the worker, the second when none.
	refused := strings.Contains(out, "Access denied by pam_slurm_adopt: you have no active jobs on this node") ||
		strings.Contains(out, "No Slurm jobs found on node.")
	if err == nil || !refused || strings.Contains(out, cluster+"-worker-1") {
		t.Fatalf("alice, with no job there: ssh worker-1 from a login node: %v\n%s\nwant a refusal by pam_slurm_adopt", err, out)
	}
	t.Logf("alice, with no job on worker-1: ssh worker-1: %s", strings.TrimSpace(out))
	// With a job there, her session joins it: its cgroup is the job's extern step.
	id := strings.TrimSpace(e.sshAsOK(key, "alice@"+e.login, "sbatch --parsable -w worker-1 --wrap 'sleep 600'"))
	defer e.sshAs(key, "alice@"+e.login, "scancel "+id)
	e.waitJobState(id, "RUNNING")
	// RUNNING is slurmctld's word; the job's extern step on worker-1, which the session joins,
	// may start a moment later.
	e.waitFor(30*time.Second, "alice let in on worker-1 with job "+id+" there", func() (bool, string) {
		out, err = e.sshAs(key, "alice@"+e.login, `ssh -o BatchMode=yes -o LogLevel=ERROR worker-1 'id -un; hostname; echo "job=$SLURM_JOB_ID"; cat /proc/self/cgroup' 2>&1`)
		return err == nil, fmt.Sprintf("%v\n%s", err, out)
	})
	if !strings.HasPrefix(out, "alice\n"+cluster+"-worker-1\njob="+id+"\n") || !strings.Contains(out, "/job_"+id+"/step_extern/") {
		t.Fatalf("alice's ssh session on worker-1 is not in job %s's extern step:\n%s", id, out)
	}
	t.Logf("alice, with job %s on worker-1: ssh worker-1:\n%s", id, strings.TrimSpace(out))
	// Root, whom the module lets in outside any job, holds a bounded capability set there, not
	// the privileged slurmd container's: no SYS_ADMIN (21), SYS_MODULE (16), SYS_RAWIO (17),
	// NET_ADMIN (12).
	out, err = e.sshJump("worker-1", "grep CapBnd /proc/self/status | cut -f2; cat /proc/self/cgroup")
	capHex, cg, _ := strings.Cut(out, "\n")
	bnd, perr := strconv.ParseUint(strings.TrimSpace(capHex), 16, 64)
	if err != nil || perr != nil {
		t.Fatalf("root on worker-1: %v %v\n%s", err, perr, out)
	}
	for _, c := range []uint{12, 16, 17, 21} {
		if bnd&(1<<c) != 0 {
			t.Errorf("capability %d is in the bounding set %x of root's ssh session on worker-1", c, bnd)
		}
	}
	if strings.Contains(cg, "job_") {
		t.Errorf("root's session on worker-1 joined a job: %s", cg)
	}
}

// sshAsOK is sshAs that must succeed.
func (e *env) sshAsOK(key, userHost, script string) string {
	e.t.Helper()
	out, err := e.sshAs(key, userHost, script)
	if err != nil {
		e.t.Fatalf("ssh %s %q: %v\n%s", userHost, script, err, out)
	}
	return out
}
