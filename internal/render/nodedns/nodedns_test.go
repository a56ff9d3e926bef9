package nodedns

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
)

func TestTheSliceNamesEachNodeInOneAddressFamily(t *testing.T) {
	sc := &slurmv1alpha1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "hpc"}}
	for _, tc := range []struct {
		name   string
		addrs  []base.NodeAddress
		family discoveryv1.AddressType
		names  []string
	}{
		{"IPv4", []base.NodeAddress{{Name: "login-0", Pod: "demo-login-0", IP: "10.0.0.5"}, {Name: "worker-1", Pod: "demo-worker-1", IP: "10.0.0.7"}},
			discoveryv1.AddressTypeIPv4, []string{"login-0", "worker-1"}},
		{"IPv6 first: IPv4 addresses are left out", []base.NodeAddress{{Name: "login-0", Pod: "demo-login-0", IP: "fd00::5"}, {Name: "worker-1", Pod: "demo-worker-1", IP: "10.0.0.7"}},
			discoveryv1.AddressTypeIPv6, []string{"login-0"}},
		{"no pod has an address", nil, discoveryv1.AddressTypeIPv4, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := EndpointSlice(base.Input{Cluster: sc, NodeAddresses: tc.addrs})
			if s.AddressType != tc.family || s.Labels[discoveryv1.LabelServiceName] != "demo-nodes" || s.Labels[discoveryv1.LabelManagedBy] != base.ManagedBy {
				t.Fatalf("slice %s, labels %v", s.AddressType, s.Labels)
			}
			if s.Endpoints == nil {
				t.Fatal("endpoints must be a list, even empty (the API server requires it)")
			}
			var names []string
			for _, e := range s.Endpoints {
				names = append(names, *e.Hostname)
			}
			if len(names) != len(tc.names) || (len(names) > 0 && names[0] != tc.names[0]) {
				t.Fatalf("host names %v, want %v", names, tc.names)
			}
		})
	}
}
