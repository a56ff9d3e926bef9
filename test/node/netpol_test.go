package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// metadataAddr is the cloud metadata address the login and worker policies block by default.
const metadataAddr = "169.254.169.254"

// startMetadataStandIn answers TCP on metadataAddr:80 from a network namespace of its own,
// routed through this machine like an address outside the cluster: pods reach it through the
// node's forwarding, where NetworkPolicies are enforced. It returns the clean-up.
func (e *env) startMetadataStandIn() func() {
	e.t.Helper()
	const ns, host, peer = "slurm-test-metadata", "slurmmd0", "slurmmd1"
	undo := fmt.Sprintf(`ip link del %s 2>/dev/null; ip netns del %s 2>/dev/null; ip route del %s/32 2>/dev/null; true`, host, ns, metadataAddr)
	e.sh("", "sh", "-c", undo)
	e.sh("", "sh", "-c", fmt.Sprintf(`set -e
ip netns add %[1]s
ip link add %[2]s type veth peer name %[3]s
ip link set %[3]s netns %[1]s
ip addr add 169.254.77.1/30 dev %[2]s && ip link set %[2]s up
ip -n %[1]s addr add 169.254.77.2/30 dev %[3]s && ip -n %[1]s addr add %[4]s/32 dev %[3]s
ip -n %[1]s link set %[3]s up && ip -n %[1]s link set lo up
ip -n %[1]s route add default via 169.254.77.1
ip route add %[4]s/32 via 169.254.77.2
`, ns, host, peer, metadataAddr))
	l, err := listenIn("/run/netns/"+ns, metadataAddr+":80")
	if err != nil {
		e.sh("", "sh", "-c", undo)
		e.t.Fatalf("the metadata stand-in: %v", err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("metadata\n"))
			_ = c.Close()
		}
	}()
	return func() {
		_ = l.Close()
		_, _ = e.run(context.Background(), "", "sh", "-c", undo)
	}
}

// listenIn listens on addr in the network namespace at nsPath: a socket stays in the namespace
// it was made in, so one OS thread enters it for the call and returns.
func listenIn(nsPath, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread stays locked, and so ends with this goroutine, unless it is back in this
		// process's namespace.
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer self.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("enter %s: %w", nsPath, err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// probeScript prints open or closed for each host:port, trying each for at most 5 s.
func probeScript(targets ...string) string {
	var b strings.Builder
	for _, t := range targets {
		host, port, _ := strings.Cut(t, ":")
		fmt.Fprintf(&b, "if timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%s' 2>/dev/null; then echo %s open; else echo %s closed; fi; ", host, port, t, t)
	}
	return b.String()
}

// checkNetworkPolicies checks, on an enforcing network, what the cluster's NetworkPolicies
// allow and refuse: a login node's shell and a job reach slurmctld, and neither slurmrestd, the
// exporter's per-user metrics nor the metadata address; slurmctld's pod, whose egress is not
// restricted, reaches the metadata stand-in, so each refusal is the policy's.
func (e *env) checkNetworkPolicies() {
	e.t.Helper()
	podIP := func(name string) string {
		return strings.TrimSpace(e.kubectlOK("get", "pod", name, "-n", ns, "-o", "jsonpath={.status.podIP}"))
	}
	ctl := podIP(cluster + "-controller-0")
	exp := strings.TrimSpace(e.kubectlOK("get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance="+cluster+",app.kubernetes.io/component=exporter", "-o", "jsonpath={.items[0].status.podIP}"))
	defer e.startMetadataStandIn()()

	slurmctld := fmt.Sprintf("%s:%d", ctl, slurmfacts.SlurmctldPort)
	restd := fmt.Sprintf("%s:%d", ctl, slurmfacts.SlurmrestdPort)
	metrics := fmt.Sprintf("%s:%d", exp, slurmfacts.ExporterPort)
	metadata := metadataAddr + ":80"
	want := func(open ...string) string {
		var lines []string
		for _, t := range []string{slurmctld, restd, metrics, metadata} {
			state := "closed"
			for _, o := range open {
				if o == t {
					state = "open"
				}
			}
			lines = append(lines, t+" "+state)
		}
		return strings.Join(lines, "\n")
	}
	probe := probeScript(slurmctld, restd, metrics, metadata)

	// slurmctld's own container: nothing restricts its egress, and its pod's policy lets it in.
	out := e.kubectlOK("exec", "-n", ns, cluster+"-controller-0", "-c", "slurmctld", "--", "bash", "-c", probe)
	if strings.TrimSpace(out) != want(slurmctld, restd, metrics, metadata) {
		e.t.Fatalf("from slurmctld's pod every target answers (or the refusals below prove nothing):\n%s", out)
	}
	e.t.Logf("from slurmctld's pod:\n%s", strings.TrimSpace(out))
	// A user's shell on a login node.
	out, err := e.sshErr(e.login, probe)
	if err != nil || strings.TrimSpace(out) != want(slurmctld) {
		e.t.Errorf("from a login node: %v\n%s\nwant:\n%s", err, out, want(slurmctld))
	}
	e.t.Logf("from a login node:\n%s", strings.TrimSpace(out))
	// A job on a worker.
	e.waitFor(time.Minute, "a job's probes", func() (bool, string) {
		out, err = e.sshErr(e.login, fmt.Sprintf("srun -N1 -w worker-0 bash -c %q", probe))
		return err == nil && strings.TrimSpace(out) == want(slurmctld), fmt.Sprintf("%v\n%s\nwant:\n%s", err, out, want(slurmctld))
	})
	e.t.Logf("from a job on worker-0:\n%s", strings.TrimSpace(out))
}
