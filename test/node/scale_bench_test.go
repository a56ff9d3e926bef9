package node

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkScaleOnARealNode measures scaling as users do it (kubectl patch of the worker size)
// on the real node, several times (NODE_BENCH_RUNS, 5 by default), and prints min, median and
// max of:
//   - up: from the patch 2 → 3 to worker-2 idle in sinfo (the pod's start included);
//   - down: from the end of the last job on worker-2 (its End in sacct) to the StatefulSet at 2
//     replicas and worker-2 gone from sinfo, after a patch 3 → 2 made while the job ran.
//
// Run it with make bench-node (root, NODE_TEST=1); -benchtime 1x: the runs are the loop.
func BenchmarkScaleOnARealNode(b *testing.B) {
	e := startNode(b)
	e.installAll()
	e.installStandInNvidiaSMI()
	e.benchScale(b)
}

// BenchmarkScaleOnSeveralNodes measures the same on a four-node Kubernetes: three worker nodes
// with one stand-in GPU each (hack/node.sh with NODE_WORKERS=3), the services on the
// control-plane node (test/node/testdata/values-nodes.yaml), so that worker-2 starts on a node
// of its own and registers across the pod network.
func BenchmarkScaleOnSeveralNodes(b *testing.B) {
	e := startNode(b, "NODE_WORKERS=3", "NODE_FAKE_GPUS=1")
	e.installAll("values-nodes.yaml")
	e.installStandInNvidiaSMI()
	on := e.benchScale(b)
	b.Logf("worker-2 ran on %s; worker-0 and worker-1 on %s and %s", strings.Join(on, ", "), e.nodeOf("worker-0"), e.nodeOf("worker-1"))
}

// benchScale scales 2 → 3 → 2 NODE_BENCH_RUNS times, timing each step; it returns the
// Kubernetes nodes worker-2 ran on.
func (e *env) benchScale(b *testing.B) []string {
	e.pollEvery = 250 * time.Millisecond
	runs := 5
	if n, err := strconv.Atoi(os.Getenv("NODE_BENCH_RUNS")); err == nil && n > 0 {
		runs = n
	}
	var up, down []time.Duration
	var on []string
	for b.Loop() {
		for range runs {
			start := time.Now()
			e.setSize(3)
			e.waitFor(3*time.Minute, "worker-2 idle", func() (bool, string) {
				out, _ := e.sshErr(e.login, "sinfo -h -n worker-2 -o %t")
				return strings.TrimSpace(out) == "idle", out
			})
			up = append(up, time.Since(start))
			if n := e.nodeOf("worker-2"); !slices.Contains(on, n) {
				on = append(on, n)
			}

			job := strings.TrimSpace(e.onLogin("sbatch --parsable -w worker-2 --wrap 'sleep 5'"))
			e.waitJobState(job, "RUNNING")
			e.setSize(2)
			e.waitFor(3*time.Minute, "worker-2 gone and the StatefulSet at 2", func() (bool, string) {
				nodes, _ := e.sshErr(e.login, "sinfo -h -N -o %N | sort -u")
				replicas, _ := e.kubectl("get", "statefulset", cluster+"-worker", "-n", ns, "-o", "jsonpath={.spec.replicas}")
				return strings.TrimSpace(nodes) == "worker-0\nworker-1" && replicas == "2", nodes + replicas
			})
			shrunk := time.Now()
			end := strings.TrimSpace(e.onLogin("sacct -n -X -P -j " + job + " -o End"))
			ended, err := time.ParseInLocation("2006-01-02T15:04:05", end, time.UTC)
			if err != nil {
				b.Fatalf("job %s End %q: %v", job, end, err)
			}
			down = append(down, shrunk.Sub(ended))
			e.waitFor(2*time.Minute, "pod "+cluster+"-worker-2 gone", func() (bool, string) {
				out, _ := e.kubectl("get", "pod", cluster+"-worker-2", "-n", ns)
				return strings.Contains(out, "NotFound"), out
			})
		}
	}
	b.Logf("scale-up, kubectl patch to the new node idle (%d runs): %s", len(up), summary(up))
	b.Logf("scale-down, the last job's end to the shrink (%d runs): %s", len(down), summary(down))
	b.ReportMetric(median(up).Seconds(), "s-up-median")
	b.ReportMetric(median(down).Seconds(), "s-down-median")
	return on
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func summary(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("min %.1fs, median %.1fs, max %.1fs", s[0].Seconds(), median(s).Seconds(), s[len(s)-1].Seconds())
}
