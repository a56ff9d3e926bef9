package netpol

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// pod is a pod as a NetworkPolicy sees it: its namespace, its labels and its address.
type pod struct {
	ns     string
	labels map[string]string
}

// allowsIngress answers as Kubernetes defines NetworkPolicies: a pod no policy selects for
// ingress takes everything; a selected pod takes what one rule of one policy allows.
func allowsIngress(t *testing.T, pols []*networkingv1.NetworkPolicy, nsLabels map[string]map[string]string, from, to pod, port int32) bool {
	t.Helper()
	selected := false
	for _, p := range pols {
		if p.Namespace != to.ns || !matches(t, &p.Spec.PodSelector, to.labels) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		selected = true
		for _, r := range p.Spec.Ingress {
			if !portMatches(r.Ports, port) {
				continue
			}
			if len(r.From) == 0 {
				return true
			}
			for _, peer := range r.From {
				if peerMatches(t, peer, p.Namespace, nsLabels, from) {
					return true
				}
			}
		}
	}
	return !selected
}

func peerMatches(t *testing.T, peer networkingv1.NetworkPolicyPeer, policyNS string, nsLabels map[string]map[string]string, from pod) bool {
	switch {
	case peer.NamespaceSelector != nil:
		if !matches(t, peer.NamespaceSelector, nsLabels[from.ns]) {
			return false
		}
		return peer.PodSelector == nil || matches(t, peer.PodSelector, from.labels)
	case peer.PodSelector != nil:
		return from.ns == policyNS && matches(t, peer.PodSelector, from.labels)
	}
	return false
}

func portMatches(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		lo := p.Port.IntVal
		hi := ptr.Deref(p.EndPort, lo)
		if port >= lo && port <= hi {
			return true
		}
	}
	return false
}

func matches(t *testing.T, s *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Matches(labels.Set(l))
}

func policies(t *testing.T, in base.Input) []*networkingv1.NetworkPolicy {
	return []*networkingv1.NetworkPolicy{Controller(in), Worker(in), Login(in), Accounting(in), Exporter(in), MariaDB(in)}
}

// Who may reach which port: every pair the cluster needs, and the ones it must refuse
// (users' pods to slurmrestd, MariaDB and the exporter; other namespaces to Slurm's daemons).
func TestWhoMayReachWhat(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
	if err != nil {
		t.Fatal(err)
	}
	in := fixtures.Input(sc)
	in.Operator = base.OperatorPods{Namespace: "slurm-system", PodLabels: map[string]string{"app.kubernetes.io/name": "slurm-operator"}}
	pols := policies(t, in)
	ns := sc.Namespace
	nsLabels := map[string]map[string]string{}
	for _, n := range []string{ns, "slurm-system", "monitoring", "mariadb-system", "other"} {
		nsLabels[n] = map[string]string{NamespaceLabel: n}
	}
	of := func(c slurmv1alpha1.Component) pod { return pod{ns, base.Labels(sc, c)} }
	ctl, wrk, lgn, acc, exp := of(slurmv1alpha1.ComponentController), of(slurmv1alpha1.ComponentWorker),
		of(slurmv1alpha1.ComponentLogin), of(slurmv1alpha1.ComponentAccounting), of(slurmv1alpha1.ComponentExporter)
	mdb := pod{ns, map[string]string{base.LabelName: "mariadb", base.LabelInstance: sc.MariaDBName()}}
	backup := of(slurmv1alpha1.ComponentUpgradeBackup)
	scheduledBackup := of(slurmv1alpha1.ComponentBackup)
	operator := pod{"slurm-system", map[string]string{"app.kubernetes.io/name": "slurm-operator"}}
	prometheus := pod{"monitoring", map[string]string{"app": "prometheus"}}
	mariadbOperator := pod{"mariadb-system", map[string]string{"app": "mariadb-operator"}}
	stranger := pod{"other", map[string]string{"app": "web"}}
	// Another cluster's login pod in the same namespace is a user's pod too.
	otherLogin := pod{ns, map[string]string{base.LabelName: "slurm", base.LabelInstance: "other", base.LabelComponent: "login"}}
	sshd := sc.Spec.SlurmNodes.Login.Sshd.Port
	srun := int32(slurmfacts.SrunPortMin + 17)

	for _, c := range []struct {
		from, to pod
		port     int32
		want     bool
		what     string
	}{
		{wrk, ctl, slurmfacts.SlurmctldPort, true, "slurmd registers with slurmctld"},
		{lgn, ctl, slurmfacts.SlurmctldPort, true, "users' commands reach slurmctld"},
		{acc, ctl, slurmfacts.SlurmctldPort, true, "slurmdbd tells slurmctld of changes"},
		{ctl, ctl, slurmfacts.SlurmctldPort, true, "a backup slurmctld reaches the primary"},
		{exp, ctl, slurmfacts.SlurmrestdPort, true, "the exporter reads slurmrestd"},
		{operator, ctl, slurmfacts.SlurmrestdPort, true, "the operator reads slurmrestd"},
		{lgn, ctl, slurmfacts.SlurmrestdPort, false, "a user's shell on a login node reaches slurmrestd"},
		{wrk, ctl, slurmfacts.SlurmrestdPort, false, "a job reaches slurmrestd"},
		{stranger, ctl, slurmfacts.SlurmrestdPort, false, "another namespace's pod reaches slurmrestd"},
		{stranger, ctl, slurmfacts.SlurmctldPort, false, "another namespace's pod reaches slurmctld"},
		{ctl, wrk, slurmfacts.SlurmdPort, true, "slurmctld reaches slurmd"},
		{ctl, wrk, srun, true, "slurmctld reaches an srun in a job"},
		{lgn, wrk, slurmfacts.SlurmdPort, true, "srun on a login node starts a step"},
		{lgn, wrk, 22, true, "ssh from a login node to a worker"},
		{lgn, wrk, 40000, false, "a login node reaches a job's other ports"},
		{wrk, wrk, 40000, true, "MPI between workers"},
		{wrk, wrk, 22, true, "ssh between workers"},
		{stranger, wrk, slurmfacts.SlurmdPort, false, "another namespace's pod reaches slurmd"},
		{stranger, lgn, sshd, true, "ssh to a login node from anywhere"},
		{wrk, lgn, srun, true, "a step's I/O back to srun on a login node"},
		{wrk, lgn, slurmfacts.SrunPortMax + 1, false, "a job reaches a login node outside SrunPortRange"},
		{ctl, lgn, 45000, true, "slurmctld reaches salloc on a login node"},
		{wrk, lgn, slurmfacts.SlurmdPort, true, "pam_slurm_adopt on a worker asks the ssh session's source"},
		{stranger, lgn, srun, false, "another namespace's pod reaches srun on a login node"},
		{ctl, acc, slurmfacts.SlurmdbdPort, true, "slurmctld reaches slurmdbd"},
		{lgn, acc, slurmfacts.SlurmdbdPort, true, "sacct on a login node"},
		{wrk, acc, slurmfacts.SlurmdbdPort, true, "sacct in a job"},
		{stranger, acc, slurmfacts.SlurmdbdPort, false, "another namespace's pod reaches slurmdbd"},
		{acc, mdb, slurmfacts.MariaDBPort, true, "slurmdbd reaches MariaDB"},
		{mariadbOperator, mdb, slurmfacts.MariaDBPort, true, "mariadb-operator reaches MariaDB"},
		{backup, mdb, slurmfacts.MariaDBPort, true, "the backup Job before an upgrade dumps MariaDB"},
		{scheduledBackup, mdb, slurmfacts.MariaDBPort, true, "a scheduled backup dumps MariaDB"},
		{lgn, mdb, slurmfacts.MariaDBPort, false, "a user's shell reaches MariaDB"},
		{wrk, mdb, slurmfacts.MariaDBPort, false, "a job reaches MariaDB"},
		{otherLogin, mdb, slurmfacts.MariaDBPort, false, "another cluster's login node reaches MariaDB"},
		{prometheus, exp, slurmfacts.ExporterPort, true, "Prometheus scrapes the exporter"},
		{lgn, exp, slurmfacts.ExporterPort, false, "a user's shell scrapes the exporter (per-user series)"},
		{wrk, exp, slurmfacts.ExporterPort, false, "a job scrapes the exporter"},
	} {
		if got := allowsIngress(t, pols, nsLabels, c.from, c.to, c.port); got != c.want {
			t.Errorf("%s (port %d): allowed %v, want %v", c.what, c.port, got, c.want)
		}
	}

	// Without the operator's namespace (a manager outside the cluster), slurmrestd is open to
	// every pod but the users'.
	in.Operator = base.OperatorPods{}
	pols = policies(t, in)
	if !allowsIngress(t, pols, nsLabels, operator, ctl, slurmfacts.SlurmrestdPort) || allowsIngress(t, pols, nsLabels, lgn, ctl, slurmfacts.SlurmrestdPort) {
		t.Errorf("without the operator's namespace: slurmrestd must take other namespaces' pods and refuse login pods")
	}
}

// Login and worker pods may reach every pod and address but the blocked ones; the other
// components' egress is not restricted.
func TestEgressBlocksOnlyTheListedAddresses(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		blocked  []string
		v4, v6   []string
		noEgress bool
	}{
		{[]string{"169.254.169.254/32", "fd00:ec2::254/128"}, []string{"169.254.169.254/32"}, []string{"fd00:ec2::254/128"}, false},
		{[]string{"169.254.0.0/16", "100.100.100.200/32"}, []string{"169.254.0.0/16", "100.100.100.200/32"}, nil, false},
		{[]string{"10.1.2.3/8"}, []string{"10.0.0.0/8"}, nil, false},                // masked, as Kubernetes wants
		{nil, []string{"169.254.169.254/32"}, []string{"fd00:ec2::254/128"}, false}, // the default
		{[]string{}, nil, nil, true},
	} {
		sc := sc.DeepCopy()
		sc.Spec.NetworkPolicies.BlockedEgressCIDRs = tc.blocked
		in := fixtures.Input(sc)
		for _, p := range []*networkingv1.NetworkPolicy{Worker(in), Login(in)} {
			hasEgress := slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
			if hasEgress == tc.noEgress {
				t.Errorf("%v: %s restricts egress %v", tc.blocked, p.Name, hasEgress)
				continue
			}
			if tc.noEgress {
				continue
			}
			to := p.Spec.Egress[0].To
			if len(p.Spec.Egress) != 1 || len(to) != 3 || to[0].NamespaceSelector == nil || len(to[0].NamespaceSelector.MatchLabels)+len(to[0].NamespaceSelector.MatchExpressions) != 0 {
				t.Fatalf("%s: egress %+v, want every pod and two address blocks", p.Name, p.Spec.Egress)
			}
			if got := fmt.Sprint(to[1].IPBlock.CIDR, to[1].IPBlock.Except, to[2].IPBlock.CIDR, to[2].IPBlock.Except); got != fmt.Sprint("0.0.0.0/0", tc.v4, "::/0", tc.v6) {
				t.Errorf("%v: %s blocks %s", tc.blocked, p.Name, got)
			}
			// Each exception lies inside its block, which the API server requires.
			for _, b := range to[1:] {
				cidr := netip.MustParsePrefix(b.IPBlock.CIDR)
				for _, e := range b.IPBlock.Except {
					if !cidr.Contains(netip.MustParsePrefix(e).Addr()) {
						t.Errorf("%s is outside %s", e, cidr)
					}
				}
			}
		}
		for _, p := range []*networkingv1.NetworkPolicy{Controller(in), Accounting(in), Exporter(in), MariaDB(in)} {
			if slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				t.Errorf("%s restricts egress", p.Name)
			}
		}
	}
}
