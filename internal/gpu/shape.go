package gpu

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// Result is the GPU shape of each worker and how it was found.
type Result struct {
	GPU base.GPU
	// Product is the product label of the shape's nodes, for the status.
	Product string
	// Source is Spec or NodeLabels ("" for CPU-only workers).
	Source string
	// Consistent is false when matching nodes disagree or none has GPUs.
	Consistent bool
	Reason     string
	Message    string
}

// nodeShape is one node's GPU configuration as its labels describe it.
type nodeShape struct {
	count   int32
	product string
	mig     []base.MIGDevice
}

func (s nodeShape) key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%s", s.count, s.product)
	for _, m := range s.mig {
		fmt.Fprintf(&b, "|%s=%d", m.Profile, m.Count)
	}
	return b.String()
}

func (s nodeShape) describe() string {
	if len(s.mig) > 0 {
		var parts []string
		for _, m := range s.mig {
			parts = append(parts, fmt.Sprintf("%d x %s", m.Count, m.Profile))
		}
		return "MIG " + strings.Join(parts, ", ")
	}
	return fmt.Sprintf("%d x %s", s.count, s.product)
}

// Find derives the workers' GPU shape from the nodes the worker filter selects. An explicit
// spec.slurmNodes.worker.gpu sets the count; node labels still give the type when they agree.
func Find(sc *slurmv1alpha1.SlurmCluster, nodes []corev1.Node) Result {
	return FindSet(sc, sc.WorkerSets()[0], nodes)
}

// FindSet is Find for one worker set: its filter's nodes, its gpu field.
func FindSet(sc *slurmv1alpha1.SlurmCluster, set slurmv1alpha1.WorkerSet, nodes []corev1.Node) Result {
	matching := MatchingSetNodes(sc, set, nodes)
	field := setField(sc, set) + ".gpu"
	filter := "the worker filter"
	if !set.Default() {
		filter = "the filter of node set " + set.Name
	}
	groups := map[string][]string{}
	shapes := map[string]nodeShape{}
	for _, n := range matching {
		s, ok := readShape(n)
		if !ok {
			continue
		}
		k := s.key()
		groups[k] = append(groups[k], n.Name)
		shapes[k] = s
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	// Majority first; ties broken by the key so the choice is stable.
	sort.Slice(keys, func(i, j int) bool {
		if len(groups[keys[i]]) != len(groups[keys[j]]) {
			return len(groups[keys[i]]) > len(groups[keys[j]])
		}
		return keys[i] < keys[j]
	})

	explicit := set.Worker.GPU
	if len(keys) == 0 {
		if explicit != nil && *explicit > 0 {
			return Result{GPU: base.GPU{Count: *explicit}, Source: "Spec", Consistent: true, Reason: slurmv1alpha1.ReasonFromSpec,
				Message: fmt.Sprintf("%s is %d; no matching node has GPU Operator labels, so the gres is untyped", field, *explicit)}
		}
		if explicit != nil {
			return Result{Consistent: true, Reason: slurmv1alpha1.ReasonFromSpec, Message: field + " is 0: CPU-only workers"}
		}
		return Result{Consistent: false, Reason: slurmv1alpha1.ReasonNoGPUNodes,
			Message: fmt.Sprintf("none of the %d nodes %s selects has %s=true: workers are CPU-only (no gres)", len(matching), filter, LabelPresent)}
	}
	major := shapes[keys[0]]
	res := Result{Product: major.product, Source: "NodeLabels", Consistent: true, Reason: slurmv1alpha1.ReasonFromNodeLabels}
	res.GPU = base.GPU{Count: major.count, Type: GresType(major.product), MIG: major.mig, SingleMIG: MIGProfile(major.product) != ""}
	if len(major.mig) > 0 {
		res.GPU.Count, res.GPU.Type = 0, ""
	}
	res.Message = fmt.Sprintf("%s on %d nodes", major.describe(), len(groups[keys[0]]))
	// Workers are always pinned to nodes of the shape they are rendered for, also while every
	// node agrees: one node's change (a GPU lost, 8 → 7) then leaves the pod template as it is,
	// instead of adding the pin and replacing every worker (and again when the node recovers).
	res.GPU.RequireLabels = requireLabels(major)
	if explicit != nil {
		res.GPU.Count, res.GPU.MIG, res.Source, res.Reason = *explicit, nil, "Spec", slurmv1alpha1.ReasonFromSpec
		res.Message = fmt.Sprintf("%s is %d; type %q from the node labels", field, *explicit, res.GPU.Type)
		if *explicit == 0 {
			res.GPU.Type = ""
		}
	}
	if len(keys) > 1 {
		var others []string
		for _, k := range keys[1:] {
			others = append(others, fmt.Sprintf("%s (%s)", strings.Join(groups[k], ", "), shapes[k].describe()))
		}
		res.Consistent = false
		res.Reason = slurmv1alpha1.ReasonNodesDisagree
		res.Message = fmt.Sprintf("nodes disagree: using the majority shape %s on %d nodes and keeping workers off %s",
			major.describe(), len(groups[keys[0]]), strings.Join(others, "; "))
	}
	return res
}

// requireLabels are the node labels that pin workers to nodes of the chosen shape.
func requireLabels(s nodeShape) map[string]string {
	l := map[string]string{LabelPresent: "true"}
	if s.product != "" {
		l[LabelProduct] = s.product
	}
	if len(s.mig) == 0 {
		l[LabelCount] = strconv.Itoa(int(s.count))
	}
	for _, m := range s.mig {
		l[labelMIGPrefix+m.Profile+labelMIGSuffix] = strconv.Itoa(int(m.Count))
	}
	return l
}

// readShape reads a node's GPU shape; false when the node has no GPUs.
func readShape(n corev1.Node) (nodeShape, bool) {
	l := n.Labels
	if l[LabelPresent] != "true" {
		return nodeShape{}, false
	}
	s := nodeShape{product: l[LabelProduct]}
	if l[LabelMIGStrategy] == "mixed" {
		for k, v := range l {
			if !strings.HasPrefix(k, labelMIGPrefix) || !strings.HasSuffix(k, labelMIGSuffix) {
				continue
			}
			c, err := strconv.Atoi(v)
			if err != nil || c <= 0 {
				continue
			}
			profile := strings.TrimSuffix(strings.TrimPrefix(k, labelMIGPrefix), labelMIGSuffix)
			s.mig = append(s.mig, base.MIGDevice{Profile: profile, Count: int32(c)})
		}
		sort.Slice(s.mig, func(i, j int) bool { return s.mig[i].Profile < s.mig[j].Profile })
		if len(s.mig) > 0 {
			return s, true
		}
	}
	if c, err := strconv.Atoi(l[LabelCount]); err == nil && c > 0 {
		s.count = int32(c)
	} else if q, ok := n.Status.Allocatable[slurmfacts.GPUResource]; ok && q.Value() > 0 {
		s.count = int32(q.Value())
	}
	return s, s.count > 0
}

// MatchingNodes are the nodes the worker's k8sNodeFilter selects (nodeSelector and required
// node affinity; tolerations only permit, they do not select).
func MatchingNodes(sc *slurmv1alpha1.SlurmCluster, nodes []corev1.Node) []corev1.Node {
	return MatchingSetNodes(sc, sc.WorkerSets()[0], nodes)
}

// setField is the spec path of a worker set: spec.slurmNodes.worker, or
// spec.slurmNodes.nodeSets[i].
func setField(sc *slurmv1alpha1.SlurmCluster, set slurmv1alpha1.WorkerSet) string {
	for i, ns := range sc.Spec.SlurmNodes.NodeSets {
		if ns.Name == set.Name && !set.Default() {
			return fmt.Sprintf("spec.slurmNodes.nodeSets[%d]", i)
		}
	}
	return "spec.slurmNodes.worker"
}

// MatchingSetNodes are the nodes a worker set's k8sNodeFilter selects.
func MatchingSetNodes(sc *slurmv1alpha1.SlurmCluster, set slurmv1alpha1.WorkerSet, nodes []corev1.Node) []corev1.Node {
	pod := &corev1.Pod{}
	base.Scheduling(sc, set.Worker.K8sNodeFilterName, &pod.Spec)
	req := nodeaffinity.GetRequiredNodeAffinity(pod)
	var out []corev1.Node
	for i := range nodes {
		if ok, _ := req.Match(&nodes[i]); ok {
			out = append(out, nodes[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
