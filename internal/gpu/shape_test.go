package gpu_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/gpu"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
	"github.com/slurm-k8s/slurm-operator/internal/render/shared"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/render/worker"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
	"github.com/slurm-k8s/slurm-operator/internal/testutil/golden"
)

// node builds a Node labelled as the GPU Operator labels one.
func node(name, product string, count int, extra map[string]string) corev1.Node {
	l := map[string]string{"kubernetes.io/hostname": name}
	if count > 0 || len(extra) > 0 {
		l[gpu.LabelPresent] = "true"
		l[gpu.LabelProduct] = product
		l[gpu.LabelCount] = fmt.Sprint(count)
	}
	for k, v := range extra {
		l[k] = v
	}
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	if count > 0 {
		n.Status.Allocatable = corev1.ResourceList{slurmfacts.GPUResource: resource.MustParse(fmt.Sprint(count))}
	}
	return n
}

func nodes(n int, product string, count int, extra map[string]string) []corev1.Node {
	var out []corev1.Node
	for i := 0; i < n; i++ {
		out = append(out, node(fmt.Sprintf("%s-%d", strings.ToLower(product), i), product, count, extra))
	}
	return out
}

// cluster is the minimal sample with 4 workers on the "gpu" filter (nodeSelector gpu.present).
func cluster(t *testing.T, explicit *int32) *slurmv1alpha1.SlurmCluster {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_minimal")
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.K8sNodeFilters = []slurmv1alpha1.K8sNodeFilter{{Name: "gpu", NodeSelector: map[string]slurmv1alpha1.LabelValue{gpu.LabelPresent: "true"}}}
	sc.Spec.SlurmNodes.Worker.K8sNodeFilterName = "gpu"
	sc.Spec.SlurmNodes.Worker.Size = 4
	sc.Spec.SlurmNodes.Worker.GPU = explicit
	return base.WithDefaults(sc)
}

var mig = map[string]string{
	gpu.LabelMIGStrategy:           "mixed",
	"nvidia.com/mig-1g.10gb.count": "4",
	"nvidia.com/mig-3g.40gb.count": "1",
}

func TestGoldenShapes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		explicit *int32
		nodes    []corev1.Node
	}{
		{"8xH100", nil, nodes(3, "NVIDIA-H100-80GB-HBM3", 8, nil)},
		{"4xA100-40GB", nil, nodes(2, "NVIDIA-A100-SXM4-40GB", 4, nil)},
		{"8xH200", nil, nodes(2, "NVIDIA-H200", 8, nil)},
		{"MIG-mixed", nil, nodes(2, "NVIDIA-H100-80GB-HBM3", 1, mig)},
		{"MIG-single", nil, nodes(2, "NVIDIA-H200-MIG-1g.18gb", 7, map[string]string{gpu.LabelMIGStrategy: "single"})},
		{"CPU-only", nil, append(nodes(2, "cpu", 0, nil), node("gpu-elsewhere", "NVIDIA-H100-80GB-HBM3", 8, map[string]string{gpu.LabelPresent: "false"}))},
		{"explicit-8-no-labels", ptr.To[int32](8), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := cluster(t, tc.explicit)
			res := gpu.Find(sc, tc.nodes)
			// With the health check on, for the GPU count it expects.
			sc.Spec.PeriodicChecks = &slurmv1alpha1.PeriodicChecks{Enabled: true}
			in := fixtures.Input(sc)
			in.GPU = res.GPU
			cm := shared.SlurmConfigMap(in)
			sts, err := worker.StatefulSet(in, in.Cluster.WorkerSets()[0])
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			fmt.Fprintf(&b, "# shape: source=%q consistent=%v reason=%s\n# %s\n", res.Source, res.Consistent, res.Reason, res.Message)
			for _, l := range strings.Split(cm.Data["slurm-base.conf"], "\n") {
				if strings.HasPrefix(l, "NodeName=") || strings.HasPrefix(l, "GresTypes=") {
					b.WriteString(l + "\n")
				}
			}
			b.WriteString("# gres.conf\n" + cm.Data["gres.conf"])
			for _, l := range strings.Split(cm.Data[slurmconf.NodeHealthScript], "\n") {
				if strings.HasPrefix(l, "EXPECTED_GPUS=") {
					b.WriteString("# node health: " + l + "\n")
				}
			}
			y, _ := yaml.Marshal(map[string]any{
				"resources": sts.Spec.Template.Spec.Containers[0].Resources,
				"affinity":  sts.Spec.Template.Spec.Affinity,
			})
			b.Write(y)
			golden.Check(t, filepath.Join("testdata", tc.name+".golden"), b.Bytes())
		})
	}
}

func TestTheMajorityShapeWinsAndMismatchedNodesAreNamed(t *testing.T) {
	sc := cluster(t, nil)
	all := append(nodes(3, "NVIDIA-H100-80GB-HBM3", 8, nil), nodes(1, "NVIDIA-A100-SXM4-40GB", 4, nil)...)
	res := gpu.Find(sc, all)
	if res.Consistent || res.Reason != slurmv1alpha1.ReasonNodesDisagree {
		t.Fatalf("want NodesDisagree, got %+v", res)
	}
	if res.GPU.Count != 8 || res.GPU.Type != "h100" {
		t.Fatalf("want the majority 8 x h100, got %+v", res.GPU)
	}
	if !strings.Contains(res.Message, "nvidia-a100-sxm4-40gb-0") {
		t.Fatalf("the mismatching node is not named: %s", res.Message)
	}
	if res.GPU.RequireLabels[gpu.LabelProduct] != "NVIDIA-H100-80GB-HBM3" || res.GPU.RequireLabels[gpu.LabelCount] != "8" {
		t.Fatalf("workers are not pinned to the majority shape: %v", res.GPU.RequireLabels)
	}
}

func TestNodesOutsideTheWorkerFilterAreIgnored(t *testing.T) {
	sc := cluster(t, nil)
	sc.Spec.K8sNodeFilters[0].NodeSelector["pool"] = "training"
	in := nodes(2, "NVIDIA-H100-80GB-HBM3", 8, map[string]string{"pool": "training"})
	other := node("inference-0", "NVIDIA-L40S", 2, map[string]string{"pool": "inference"})
	res := gpu.Find(sc, append(in, other))
	if !res.Consistent || res.GPU.Type != "h100" {
		t.Fatalf("a node outside the filter changed the shape: %+v", res)
	}
}

func TestTheExplicitCountWinsOverLabels(t *testing.T) {
	res := gpu.Find(cluster(t, ptr.To[int32](4)), nodes(2, "NVIDIA-H100-80GB-HBM3", 8, nil))
	if res.GPU.Count != 4 || res.GPU.Type != "h100" || res.Source != "Spec" {
		t.Fatalf("want 4 x h100 from the spec, got %+v", res)
	}
}

func TestGresTypeNormalisesProducts(t *testing.T) {
	for product, want := range map[string]string{
		"NVIDIA-H100-80GB-HBM3":            "h100",
		"NVIDIA-A100-SXM4-40GB":            "a100",
		"NVIDIA-H200":                      "h200",
		"Tesla-V100-SXM2-16GB":             "v100",
		"NVIDIA-GeForce-RTX-4090":          "rtx4090",
		"NVIDIA-L40S":                      "l40s",
		"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb": "1g.5gb",
		"NVIDIA-H200-MIG-1g.18gb":          "1g.18gb",
		"":                                 "",
	} {
		if got := gpu.GresType(product); got != want {
			t.Errorf("GresType(%q) = %q, want %q", product, got, want)
		}
	}
}

func TestOnlyGPULabelsAreShapeLabels(t *testing.T) {
	for key, want := range map[string]bool{
		gpu.LabelProduct:               true,
		"nvidia.com/mig-1g.10gb.count": true,
		"nvidia.com/gpu.family":        false,
		"topology.kubernetes.io/zone":  false,
	} {
		if gpu.IsShapeLabel(key) != want {
			t.Errorf("IsShapeLabel(%q) != %v", key, want)
		}
	}
}

// Each node set's shape comes from its own filter's nodes: H100 workers and an A100 set side by
// side are two consistent shapes, not a disagreement that keeps the minority idle.
func TestEachNodeSetHasTheShapeOfItsOwnNodes(t *testing.T) {
	sc, err := fixtures.Sample("slurm_v1alpha1_slurmcluster_nodesets")
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.SlurmNodes.Worker.GPU = nil
	sc.Spec.SlurmNodes.NodeSets[0].GPU = nil
	sc = base.WithDefaults(sc)
	all := append(append(nodes(3, "NVIDIA-H100-80GB-HBM3", 8, map[string]string{"node.example.com/pool": "h100"}),
		nodes(2, "NVIDIA-A100-SXM4-40GB", 4, map[string]string{"node.example.com/pool": "a100"})...),
		node("cpu-0", "", 0, map[string]string{"node.example.com/pool": "cpu"}))
	sets := sc.WorkerSets()
	for _, tc := range []struct {
		set, typ string
		count    int32
		product  string
	}{
		{"worker", "h100", 8, "NVIDIA-H100-80GB-HBM3"},
		{"a100", "a100", 4, "NVIDIA-A100-SXM4-40GB"},
		{"cpu", "", 0, ""},
	} {
		var set slurmv1alpha1.WorkerSet
		for _, s := range sets {
			if s.Name == tc.set {
				set = s
			}
		}
		res := gpu.FindSet(sc, set, all)
		if !res.Consistent || res.GPU.Count != tc.count || res.GPU.Type != tc.typ {
			t.Errorf("set %s: got %d × %q (consistent %v: %s), want %d × %q", tc.set, res.GPU.Count, res.GPU.Type, res.Consistent, res.Message, tc.count, tc.typ)
		}
		if tc.product != "" && res.GPU.RequireLabels[gpu.LabelProduct] != tc.product {
			t.Errorf("set %s: pinned to %v, want the product %s", tc.set, res.GPU.RequireLabels, tc.product)
		}
	}
	if msg := gpu.FindSet(sc, sets[2], all).Message; !strings.Contains(msg, "spec.slurmNodes.nodeSets[1].gpu is 0") {
		t.Errorf("the CPU set's message does not name its field: %s", msg)
	}
}
