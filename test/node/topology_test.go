package node

import (
	"maps"
	"regexp"
	"strings"
	"time"
)

const rackLabel = "topology.example.com/rack"

// checkTopology turns a block topology on for the running cluster, from a rack label on the two
// worker nodes: slurmctld reads a block per node, follows a relabel, a two-node job still runs,
// and no pod is replaced. It turns the topology off again, so later steps run without it.
func (e *env) checkTopology() {
	e.t.Helper()
	n0, n1 := e.nodeOf("worker-0"), e.nodeOf("worker-1")
	e.kubectlOK("label", "node", n0, rackLabel+"=rack-a", "--overwrite")
	e.kubectlOK("label", "node", n1, rackLabel+"=rack-b", "--overwrite")
	defer e.kubectl("label", "node", n0, n1, rackLabel+"-")
	before := e.podsSnapshot()
	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=merge", "-p",
		`{"spec":{"slurmConfig":{"topology":{"plugin":"block","blockLabel":"`+rackLabel+`"}}}}`)
	topology := func(want ...string) {
		e.t.Helper()
		e.waitFor(2*time.Minute, "scontrol show topology: "+strings.Join(want, ", "), func() (bool, string) {
			out, err := e.sshErr(e.login, "scontrol show topology")
			for _, w := range want {
				if err != nil || !regexp.MustCompile(w).MatchString(out) {
					return false, out
				}
			}
			return true, out
		})
	}
	topology(`BlockName=rack-a .*Nodes=worker-0\b`, `BlockName=rack-b .*Nodes=worker-1\b`)

	// The worker-1 node moves to rack-a: one block of both.
	e.kubectlOK("label", "node", n1, rackLabel+"=rack-a", "--overwrite")
	topology(`BlockName=rack-a .*Nodes=worker-\[0-1\]`)
	if out := e.onLogin("srun -N2 hostname | sort"); out != cluster+"-worker-0\n"+cluster+"-worker-1\n" {
		e.t.Errorf("srun -N2 hostname in one block printed %q", out)
	}
	if after := e.podsSnapshot(); !maps.Equal(before, after) {
		e.t.Errorf("turning the topology on replaced or restarted pods:\nbefore %v\nafter  %v", before, after)
	}

	e.kubectlOK("patch", "slurmcluster", cluster, "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/slurmConfig/topology"}]`)
	e.waitFor(2*time.Minute, "slurmctld without a topology plugin", func() (bool, string) {
		out, err := e.sshErr(e.login, "scontrol show config | grep -i '^TopologyPlugin'")
		return err == nil && !strings.Contains(out, "block"), out
	})
}
