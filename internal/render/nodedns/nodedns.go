// Package nodedns renders the DNS names of a cluster's Slurm nodes: a headless Service without
// a selector and its EndpointSlice, whose endpoints carry the Slurm node names (controller-0,
// worker-3, login-1) as host names. Every pod of the cluster searches the Service's domain, so
// `ssh worker-3` on a login node, and `ssh -J root@<login Service> root@login-1` (the login
// node's sshd resolves the second hop), reach the node Slurm calls by that name. The names live
// under the cluster's own Service, so two clusters in one namespace do not clash. The pods'
// search domain for them is added by base.DNSConfig.
package nodedns

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

// Service is the headless Service that holds the names. Its endpoints are the operator's
// (EndpointSlice), not a selector's: a selector's endpoints are named after the pods.
func Service(in base.Input) *corev1.Service {
	sc := in.Cluster
	return &corev1.Service{
		TypeMeta:   base.TypeMeta("v1", "Service"),
		ObjectMeta: base.ObjectMeta(sc, sc.NodeNamesServiceName(), slurmv1alpha1.ComponentNodeNames),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Ports:                    []corev1.ServicePort{{Name: "ssh", Port: 22}},
		},
	}
}

// EndpointSlice names each node that has a pod address: in.NodeAddresses, in order, of the
// family of the first (a dual-stack pod's first address is its primary one).
func EndpointSlice(in base.Input) *discoveryv1.EndpointSlice {
	sc := in.Cluster
	meta := base.ObjectMeta(sc, sc.NodeNamesServiceName(), slurmv1alpha1.ComponentNodeNames)
	meta.Labels[discoveryv1.LabelServiceName] = sc.NodeNamesServiceName()
	meta.Labels[discoveryv1.LabelManagedBy] = base.ManagedBy
	family := discoveryv1.AddressTypeIPv4
	if len(in.NodeAddresses) > 0 && isIPv6(in.NodeAddresses[0].IP) {
		family = discoveryv1.AddressTypeIPv6
	}
	eps := []discoveryv1.Endpoint{}
	for _, a := range in.NodeAddresses {
		if isIPv6(a.IP) != (family == discoveryv1.AddressTypeIPv6) {
			continue
		}
		eps = append(eps, discoveryv1.Endpoint{
			Addresses:  []string{a.IP},
			Hostname:   ptr.To(a.Name),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: sc.Namespace, Name: a.Pod},
		})
	}
	return &discoveryv1.EndpointSlice{
		TypeMeta:    base.TypeMeta("discovery.k8s.io/v1", "EndpointSlice"),
		ObjectMeta:  meta,
		AddressType: family,
		Endpoints:   eps,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("ssh"), Port: ptr.To[int32](22), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

func isIPv6(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Is6() && !a.Is4In6()
}
