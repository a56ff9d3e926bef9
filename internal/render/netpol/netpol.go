// Package netpol renders a cluster's NetworkPolicies: for each component, the pods that may
// reach each of its ports, and for the pods users reach (login nodes) or run code on (workers),
// the addresses they may not reach (the cloud's metadata service). A policy selects its
// component's pods only, so a port not named here is closed to everyone but the node itself
// (kubelet probes), as Kubernetes defines NetworkPolicies.
//
// Who talks to whom:
//
//	slurmctld  6817  workers (slurmd, jobs' srun), login nodes (users' commands), slurmdbd, the
//	                 other controller (a backup's takeover)
//	slurmrestd 6820  the exporter and the operator's pods; never users
//	slurmd     6818  slurmctld, login nodes (srun starts steps), other workers
//	worker     *     other workers (MPI, NCCL, PMIx, srun inside jobs, ssh) and slurmctld
//	worker sshd 22   login nodes and other workers
//	login sshd       everyone (the LoadBalancer)
//	login srun       SrunPortRange from workers (step I/O) and from slurmctld (any port);
//	                 6818 from workers (pam_slurm_adopt's question, refused at once)
//	slurmdbd   6819  slurmctld, login nodes and workers (sacct, sacctmgr), other slurmdbd
//	MariaDB    3306  slurmdbd, and anything outside the cluster's user-facing pods (mariadb-operator)
//	exporter   9341  anything outside the cluster's user-facing pods (Prometheus)
package netpol

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// NamespaceLabel is the label Kubernetes sets on every namespace to its own name.
const NamespaceLabel = "kubernetes.io/metadata.name"

// userFacing are the components whose pods run users' sessions and jobs.
var userFacing = []string{string(slurmv1alpha1.ComponentLogin), string(slurmv1alpha1.ComponentWorker)}

// Controller admits slurmctld's clients and slurmrestd's (the exporter and the operator).
func Controller(in base.Input) *networkingv1.NetworkPolicy {
	sc := in.Cluster
	restd := pods(sc, slurmv1alpha1.ComponentExporter)
	restd = append(restd, operatorPeers(in)...)
	return policy(in, slurmv1alpha1.ComponentController, []networkingv1.NetworkPolicyIngressRule{
		{Ports: tcp(slurmfacts.SlurmctldPort), From: pods(sc,
			slurmv1alpha1.ComponentWorker, slurmv1alpha1.ComponentLogin, slurmv1alpha1.ComponentAccounting, slurmv1alpha1.ComponentController)},
		{Ports: tcp(slurmfacts.SlurmrestdPort), From: restd},
	}, false)
}

// Worker admits other workers and slurmctld on every port, and login nodes on slurmd's and
// sshd's; its pods may not reach the blocked addresses.
func Worker(in base.Input) *networkingv1.NetworkPolicy {
	sc := in.Cluster
	return policy(in, slurmv1alpha1.ComponentWorker, []networkingv1.NetworkPolicyIngressRule{
		{From: pods(sc, slurmv1alpha1.ComponentWorker, slurmv1alpha1.ComponentController)},
		{Ports: tcp(slurmfacts.SlurmdPort, 22), From: pods(sc, slurmv1alpha1.ComponentLogin)},
	}, true)
}

// Login admits ssh from anywhere, slurmctld on every port and workers on SrunPortRange and
// slurmd's port; its pods may not reach the blocked addresses.
func Login(in base.Input) *networkingv1.NetworkPolicy {
	sc := in.Cluster
	return policy(in, slurmv1alpha1.ComponentLogin, []networkingv1.NetworkPolicyIngressRule{
		{Ports: tcp(sc.Spec.SlurmNodes.Login.Sshd.Port)},
		{From: pods(sc, slurmv1alpha1.ComponentController)},
		// slurmd's port too, where nothing listens: pam_slurm_adopt on a worker asks the ssh
		// session's source there which job it came from, and a refused connection answers at
		// once where a dropped one (some networks drop rather than reject) would be waited out.
		{Ports: append(srunPorts(), tcp(slurmfacts.SlurmdPort)...), From: pods(sc, slurmv1alpha1.ComponentWorker)},
	}, true)
}

// Accounting admits slurmdbd's clients: slurmctld, users' commands on login nodes and in jobs.
func Accounting(in base.Input) *networkingv1.NetworkPolicy {
	sc := in.Cluster
	return policy(in, slurmv1alpha1.ComponentAccounting, []networkingv1.NetworkPolicyIngressRule{
		{Ports: tcp(slurmfacts.SlurmdbdPort), From: pods(sc,
			slurmv1alpha1.ComponentController, slurmv1alpha1.ComponentLogin, slurmv1alpha1.ComponentWorker, slurmv1alpha1.ComponentAccounting)},
	}, false)
}

// Exporter admits scrapers: any pod but the user-facing ones.
func Exporter(in base.Input) *networkingv1.NetworkPolicy {
	return policy(in, slurmv1alpha1.ComponentExporter, []networkingv1.NetworkPolicyIngressRule{
		{Ports: tcp(slurmfacts.ExporterPort), From: notUsers(in.Cluster)},
	}, false)
}

// MariaDB guards the database mariadb-operator runs for the cluster: slurmdbd, mariadb-operator
// (in a namespace of its own) and the database's own pods (replication) reach it; users do not.
// It selects the pods by mariadb-operator's labels (app.kubernetes.io/name mariadb, instance
// the MariaDB's name).
func MariaDB(in base.Input) *networkingv1.NetworkPolicy {
	sc := in.Cluster
	p := policy(in, slurmv1alpha1.ComponentAccounting, []networkingv1.NetworkPolicyIngressRule{
		{From: notUsers(sc)},
	}, false)
	p.Name = sc.MariaDBName()
	p.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{
		base.LabelName: "mariadb", base.LabelInstance: sc.MariaDBName(),
	}}
	return p
}

// policy is a component's NetworkPolicy with these ingress rules and, with blockEgress, an
// egress rule that allows every address but spec.networkPolicies.blockedEgressCIDRs.
func policy(in base.Input, comp slurmv1alpha1.Component, ingress []networkingv1.NetworkPolicyIngressRule, blockEgress bool) *networkingv1.NetworkPolicy {
	sc := in.Cluster
	p := &networkingv1.NetworkPolicy{
		TypeMeta:   base.TypeMeta("networking.k8s.io/v1", "NetworkPolicy"),
		ObjectMeta: base.ObjectMeta(sc, sc.ComponentName(comp), comp),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: base.SelectorLabels(sc, comp)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
	if blockEgress {
		if rule, ok := egressBut(sc.Spec.NetworkPolicies.BlockedEgressCIDRs); ok {
			p.Spec.PolicyTypes = append(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
			p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{rule}
		}
	}
	return p
}

// egressBut allows every pod and every IPv4 and IPv6 address except the blocked ones; false
// when none is blocked (no egress rule is needed then). Pods are named apart from the address
// blocks: some networks (Cilium's) match ipBlock against addresses outside the cluster only, and
// would otherwise refuse every pod, the DNS server included.
func egressBut(blocked []string) (networkingv1.NetworkPolicyEgressRule, bool) {
	var v4, v6 []string
	for _, c := range blocked {
		p, err := netip.ParsePrefix(c)
		if err != nil || p.Bits() == 0 {
			continue // admission refuses both
		}
		if p.Addr().Is4() {
			v4 = append(v4, p.Masked().String())
		} else {
			v6 = append(v6, p.Masked().String())
		}
	}
	if len(v4)+len(v6) == 0 {
		return networkingv1.NetworkPolicyEgressRule{}, false
	}
	return networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: v4}},
		{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: v6}},
	}}, true
}

// pods are this cluster's pods of the given components, in its namespace.
func pods(sc *slurmv1alpha1.SlurmCluster, comps ...slurmv1alpha1.Component) []networkingv1.NetworkPolicyPeer {
	values := make([]string, 0, len(comps))
	for _, c := range comps {
		values = append(values, string(c))
	}
	return []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
		MatchLabels:      base.ClusterLabels(sc),
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: base.LabelComponent, Operator: metav1.LabelSelectorOpIn, Values: values}},
	}}}
}

// notUsers are every pod of other namespaces, and the pods of this namespace that are no Slurm
// cluster's login or worker pods (whoever has a shell there could read or reach what is behind).
func notUsers(sc *slurmv1alpha1.SlurmCluster) []networkingv1.NetworkPolicyPeer {
	return []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: NamespaceLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{sc.Namespace}},
		}}},
		{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: base.LabelComponent, Operator: metav1.LabelSelectorOpNotIn, Values: userFacing},
		}}},
	}
}

// operatorPeers are the operator's pods when the manager knows where it runs (in a cluster);
// otherwise every pod outside the cluster's user-facing ones, as for the exporter.
func operatorPeers(in base.Input) []networkingv1.NetworkPolicyPeer {
	op := in.Operator
	if op.Namespace == "" || len(op.PodLabels) == 0 {
		return notUsers(in.Cluster)
	}
	return []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceLabel: op.Namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: op.PodLabels},
	}}
}

func tcp(ports ...int32) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, 0, len(ports))
	for _, p := range ports {
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(p))})
	}
	return out
}

// srunPorts is SrunPortRange, TCP.
func srunPorts() []networkingv1.NetworkPolicyPort {
	return []networkingv1.NetworkPolicyPort{{
		Protocol: ptr.To(corev1.ProtocolTCP),
		Port:     ptr.To(intstr.FromInt32(slurmfacts.SrunPortMin)),
		EndPort:  ptr.To(int32(slurmfacts.SrunPortMax)),
	}}
}
