package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// LabelValue is a Kubernetes label value: at most 63 letters, digits, '-', '_' and '.',
// starting and ending with a letter or digit, or empty.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// Toleration is Kubernetes' toleration of a taint (kubectl explain pod.spec.tolerations).
// +kubebuilder:validation:XValidation:rule="(has(self.key) && size(self.key) > 0) || (has(self.operator) && self.operator == 'Exists')",message="operator must be Exists when key is empty (a toleration of every taint)",fieldPath=".operator"
// +kubebuilder:validation:XValidation:rule="!has(self.operator) || self.operator != 'Exists' || !has(self.value) || size(self.value) == 0",message="value must be empty when operator is Exists",fieldPath=".value"
// +kubebuilder:validation:XValidation:rule="!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",message="tolerationSeconds needs effect NoExecute",fieldPath=".tolerationSeconds"
type Toleration struct {
	// Key is the taint's key; empty with operator Exists tolerates every taint.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`
	// +optional
	Key string `json:"key,omitempty"`

	// Operator is Equal (the taint's value must be Value; also when empty) or Exists (any
	// value). No default is filled in: an empty operator stays empty in the pods, as written.
	// +kubebuilder:validation:Enum="";Equal;Exists
	// +optional
	Operator corev1.TolerationOperator `json:"operator,omitempty"`

	// Value is the taint's value, for operator Equal.
	// +optional
	Value LabelValue `json:"value,omitempty"`

	// Effect is the taint effect tolerated; empty: every effect.
	// +kubebuilder:validation:Enum="";NoSchedule;PreferNoSchedule;NoExecute
	// +optional
	Effect corev1.TaintEffect `json:"effect,omitempty"`

	// TolerationSeconds, for effect NoExecute, is how long the pod stays on a node after the
	// taint appears (unset: for ever).
	// +optional
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// Core is the toleration as Kubernetes' type.
func (t Toleration) Core() corev1.Toleration {
	out := corev1.Toleration{Key: t.Key, Operator: t.Operator, Value: string(t.Value), Effect: t.Effect}
	if t.TolerationSeconds != nil {
		s := *t.TolerationSeconds
		out.TolerationSeconds = &s
	}
	return out
}

// ContainerResources are a container's requests and limits (kubectl explain
// pod.spec.containers.resources), checked at admission as Kubernetes checks a container's.
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || ['cpu', 'memory', 'ephemeral-storage'].all(k, !(k in self.requests) || !(k in self.limits) || quantity(string(self.requests[k])).compareTo(quantity(string(self.limits[k]))) <= 0)",message="every request must be at most its limit",fieldPath=".requests"
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || (has(self.limits) && k in self.limits))",message="an extended resource or huge pages cannot be overcommitted: a request needs a limit of the same amount",fieldPath=".requests"
// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || !('nvidia.com/gpu' in self.requests) || !('nvidia.com/gpu' in self.limits) || quantity(string(self.requests['nvidia.com/gpu'])).compareTo(quantity(string(self.limits['nvidia.com/gpu']))) == 0",message="GPUs cannot be overcommitted: the request must be the limit",fieldPath=".requests"
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !('nvidia.com/gpu' in self.limits) || quantity(string(self.limits['nvidia.com/gpu'])).isInteger()",message="GPUs are counted in whole units",fieldPath=".limits"
type ContainerResources struct {
	// Limits are the most the container may use.
	// +kubebuilder:validation:MaxProperties=10
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || (k.contains('/') && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')))",message="every resource must be cpu, memory, ephemeral-storage, hugepages-<size>, or a name with a DNS prefix such as nvidia.com/gpu"
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`

	// Requests are what the scheduler reserves for the container.
	// +kubebuilder:validation:MaxProperties=10
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage'] || k.startsWith('hugepages-') || (k.contains('/') && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')))",message="every resource must be cpu, memory, ephemeral-storage, hugepages-<size>, or a name with a DNS prefix such as nvidia.com/gpu"
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`

	// Claims are not taken: the operator's pods have no resource claims.
	// +kubebuilder:validation:MaxItems=0
	// +optional
	Claims []corev1.ResourceClaim `json:"claims,omitempty"`
}

// Core is the resources as Kubernetes' type.
func (r ContainerResources) Core() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: r.Limits.DeepCopy(), Requests: r.Requests.DeepCopy()}
}

// The node affinity of a node filter is Kubernetes' own, field for field, with bounds on its
// lists so that the API server can check Kubernetes' pod rules on it at admission (CEL rules
// over unbounded lists exceed the API server's cost limits). A spec the API server admits is one
// Kubernetes accepts when the operator writes its pods.

// NodeFilterAffinity is the node affinity of the pods a node filter places.
// +kubebuilder:validation:XValidation:rule="!has(self.podAffinity) && !has(self.podAntiAffinity)",message="a node filter chooses nodes: set nodeAffinity; pod affinity and anti-affinity are not taken here (the operator spreads controllers and login pods across nodes itself)"
type NodeFilterAffinity struct {
	// NodeAffinity is Kubernetes' node affinity (kubectl explain pod.spec.affinity.nodeAffinity).
	// +optional
	NodeAffinity *NodeAffinity `json:"nodeAffinity,omitempty"`

	// PodAffinity is refused: a node filter chooses nodes.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	PodAffinity *runtime.RawExtension `json:"podAffinity,omitempty"`

	// PodAntiAffinity is refused: a node filter chooses nodes.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +optional
	PodAntiAffinity *runtime.RawExtension `json:"podAntiAffinity,omitempty"`
}

// NodeAffinity is Kubernetes' node affinity.
type NodeAffinity struct {
	// RequiredDuringSchedulingIgnoredDuringExecution: the pods go only to nodes that match one
	// of its terms.
	// +optional
	RequiredDuringSchedulingIgnoredDuringExecution *NodeSelector `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`

	// PreferredDuringSchedulingIgnoredDuringExecution: the scheduler prefers nodes that match
	// these terms, by their weights.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	PreferredDuringSchedulingIgnoredDuringExecution []PreferredSchedulingTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// NodeSelector is a list of node selector terms, any of which a node must match.
type NodeSelector struct {
	// NodeSelectorTerms are ORed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	NodeSelectorTerms []NodeSelectorTerm `json:"nodeSelectorTerms"`
}

// NodeSelectorTerm is a set of requirements a node must all match.
// +kubebuilder:validation:XValidation:rule="!has(self.matchFields) || self.matchFields.all(f, f.key == 'metadata.name' && f.operator in ['In', 'NotIn'] && has(f.values) && size(f.values) == 1)",message="matchFields may only match metadata.name, with In or NotIn and one value",fieldPath=".matchFields"
type NodeSelectorTerm struct {
	// MatchExpressions are requirements on node labels.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`

	// MatchFields are requirements on node fields (metadata.name only).
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	// +optional
	MatchFields []NodeSelectorRequirement `json:"matchFields,omitempty"`
}

// NodeSelectorRequirement is a key, an operator and values.
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",message="values must not be empty when operator is In or NotIn",fieldPath=".values"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",message="values must be empty when operator is Exists or DoesNotExist",fieldPath=".values"
// +kubebuilder:validation:XValidation:rule="!(self.operator in ['Gt', 'Lt']) || (has(self.values) && size(self.values) == 1 && self.values[0].matches('^[-+]?[0-9]+$'))",message="operator Gt or Lt takes exactly one value, an integer",fieldPath=".values"
type NodeSelectorRequirement struct {
	// Key is the label (or, in matchFields, the field) the requirement is about.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Key string `json:"key"`

	// Operator relates the key to the values: In, NotIn, Exists, DoesNotExist, Gt or Lt.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt
	Operator corev1.NodeSelectorOperator `json:"operator"`

	// Values: one or more for In and NotIn, none for Exists and DoesNotExist, one integer for
	// Gt and Lt.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// PreferredSchedulingTerm is a weighted node selector term.
type PreferredSchedulingTerm struct {
	// Weight, from 1 to 100, is added to a node's score when it matches.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`

	// Preference is the term.
	Preference NodeSelectorTerm `json:"preference"`
}

// Core is the affinity as Kubernetes' type, for a pod spec.
func (a *NodeFilterAffinity) Core() *corev1.Affinity {
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	out := &corev1.NodeAffinity{}
	if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		out.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		for _, t := range r.NodeSelectorTerms {
			out.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(out.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, t.core())
		}
	}
	for _, p := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		out.PreferredDuringSchedulingIgnoredDuringExecution = append(out.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: p.Weight, Preference: p.Preference.core()})
	}
	return &corev1.Affinity{NodeAffinity: out}
}

func (t NodeSelectorTerm) core() corev1.NodeSelectorTerm {
	conv := func(in []NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
		var out []corev1.NodeSelectorRequirement
		for _, r := range in {
			out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: append([]string(nil), r.Values...)})
		}
		return out
	}
	return corev1.NodeSelectorTerm{MatchExpressions: conv(t.MatchExpressions), MatchFields: conv(t.MatchFields)}
}
