package node

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// checkNodeSet adds a CPU-only node set with a partition of its own to the running cluster,
// runs a job there by its feature, and removes the set again: the set's pod starts on the
// kubelet, registers as cpu-0 in Slurm, and leaves sinfo and the API with its StatefulSet; no
// worker or other pod is replaced or restarted on the way.
func (e *env) checkNodeSet() {
	e.t.Helper()
	e.nodeSetSpoolVolumes("cpu", 1)
	orig, partitions, withCPU := e.partitionsWith("cpu")
	before := e.podsSnapshot()

	start := time.Now()
	// The set's memory per CPU is the workers' (3Gi, 1 CPU): DefMemPerCPU is derived from
	// slurmNodes.worker for the whole cluster (docs/node-sets.md).
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", `{"spec":{"slurmNodes":{"nodeSets":[{"name":"cpu","size":1,"gpu":0,"features":["small"],`+
		`"resources":{"requests":{"cpu":"50m","memory":"256Mi"},"limits":{"cpu":"1","memory":"3Gi"}}}]},"slurmConfig":{"partitions":`+withCPU+`}}}`)
	removePatch := `{"spec":{"slurmNodes":{"nodeSets":null},"slurmConfig":{"partitions":` + orig + `}}}`
	gone := e.nodeSetGone("cpu")
	removed := false
	// A failure on the way still takes the set out, as well as it can without failing again:
	// the later steps count the cluster's nodes and StatefulSets.
	defer e.removeNodeSetUnless(&removed, removePatch, gone)
	e.waitFor(4*time.Minute, "cpu-0 idle in partition cpu with its features", func() (bool, string) {
		out, _ := e.sshErr(e.login, "sinfo -h -p cpu -N -o '%N %t %f'")
		return strings.TrimSpace(out) == "cpu-0 idle cpu,small", out
	})
	e.t.Logf("node set: kubectl patch to cpu-0 idle in sinfo: %.1fs", time.Since(start).Seconds())
	if out := e.onLogin("srun -p cpu --constraint=small hostname"); strings.TrimSpace(out) != cluster+"-cpu-0" {
		e.t.Errorf("srun -p cpu --constraint=small hostname: %q", out)
	}
	// A partition that names no set holds every set's nodes; one that names sets, only theirs.
	for _, p := range partitions {
		name, _ := p["name"].(string)
		out := e.onLogin("sinfo -h -p " + name + " -N -o %N | sort -u")
		if want := !partitionNamesSets(p); strings.Contains(out, "cpu-0") != want {
			e.t.Errorf("partition %s lists %q; cpu-0 in it: want %v", name, out, want)
		}
	}

	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", removePatch)
	removed = true
	e.waitFor(3*time.Minute, "the set's StatefulSet gone and cpu-0 gone from sinfo", gone)
	after := e.podsSnapshot()
	for name, was := range before {
		if after[name] != was {
			e.t.Errorf("pod %s was replaced or restarted: %q, then %q", name, was, after[name])
		}
	}
}

// partitionNamesSets says whether a partition names node sets: one that names none holds every
// set's nodes.
func partitionNamesSets(p map[string]any) bool {
	sets, _ := p["nodeSets"].([]any)
	return len(sets) > 0
}

// nodeSetSpoolVolumes makes the volumes the spool claims of a set's first n pods bind to, on
// the node, as the workers' do (hack/demo/storage.yaml).
func (e *env) nodeSetSpoolVolumes(set string, n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < n; i++ {
		pv := fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s-%[4]s-spool-%[5]d}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: node-local
  claimRef: {namespace: %[2]s, name: spool-%[1]s-%[4]s-%[5]d}
  hostPath: {path: %[3]s, type: DirectoryOrCreate}
`, cluster, ns, hostVolume(fmt.Sprintf("%s-spool-%d", set, i)), set, i)
		if out, err := e.run(ctx, pv, filepath.Join(e.assets, "kubectl"), "apply", "-f", "-"); err != nil {
			e.t.Fatalf("the set's spool volume: %v: %s", err, out)
		}
	}
}

// partitionsWith returns the spec's partitions as they are (JSON, and parsed), and as JSON with
// a partition of the set's own, named as the set.
func (e *env) partitionsWith(set string) (string, []map[string]any, string) {
	e.t.Helper()
	orig := e.kubectlOK("get", "slurmcluster", cluster, "-n", ns, "-o", "jsonpath={.spec.slurmConfig.partitions}")
	var partitions []map[string]any
	if err := json.Unmarshal([]byte(orig), &partitions); err != nil {
		e.t.Fatalf("partitions %q: %v", orig, err)
	}
	with, _ := json.Marshal(append(partitions, map[string]any{"name": set, "nodeSets": []string{set}}))
	return orig, partitions, string(with)
}

// nodeSetGone reports whether the set's StatefulSet is gone and sinfo lists none of its nodes.
func (e *env) nodeSetGone(set string) func() (bool, string) {
	return func() (bool, string) {
		sts, _ := e.kubectl("get", "statefulset", cluster+"-"+set, "-n", ns)
		nodes, _ := e.sshErr(e.login, "sinfo -h -N -o %N | sort -u")
		return strings.Contains(sts, "NotFound") && !strings.Contains(nodes, set+"-"), sts + nodes
	}
}

// removeNodeSetUnless takes a set out with removePatch and waits for it to go, unless *removed:
// for a step that failed on the way, as well as it can without failing again.
func (e *env) removeNodeSetUnless(removed *bool, removePatch string, gone func() (bool, string)) {
	if *removed {
		return
	}
	_, _ = e.kubectl("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p", removePatch)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		if ok, _ := gone(); ok {
			return
		}
	}
}
