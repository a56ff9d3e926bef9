package v1alpha1

import "time"

// Autoscaling lets Slurm size a worker set: every node up to maxSize is in slurm.conf from the
// start (sinfo shows the capacity, and a job larger than it is refused at submit), the nodes
// without a pod are powered down in Slurm's terms (idle~), and when jobs need nodes Slurm
// powers up the ones it chose and the operator makes their pods. A node idle for idleTimeout is
// powered down and its pod removed, from the highest-numbered node down (docs/scaling.md).
// +kubebuilder:validation:XValidation:rule="!has(self.minSize) || !has(self.maxSize) || self.minSize <= self.maxSize",message="minSize must not be above maxSize",fieldPath=".minSize"
type Autoscaling struct {
	// Enabled turns autoscaling on. Off (the default): the set has size nodes, always.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// MinSize nodes are never powered down: <set>-0 … <set>-(minSize-1) always have a pod.
	// 0 (the default) lets an idle set hold no pod and no GPU.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MinSize int32 `json:"minSize,omitempty"`

	// MaxSize is how many nodes the set may have: <set>-0 … <set>-(maxSize-1), all known to
	// slurmctld. Lowering it drains the nodes above it first, as a scale-down does.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	MaxSize int32 `json:"maxSize"`

	// IdleTimeoutSeconds is how long a node stays up with no job (Slurm's own idle time of the
	// node) before it is powered down and its pod removed.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=2592000
	// +kubebuilder:default=600
	// +optional
	IdleTimeoutSeconds int32 `json:"idleTimeoutSeconds,omitempty"`

	// ResumeTimeoutSeconds is how long Slurm waits for a node it powered up to register
	// (Slurm's ResumeTimeout): the pod's scheduling, image pull and start. A node that misses
	// it is set DOWN with Slurm's reason and its job is requeued; the scheduler uses other
	// nodes meanwhile.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=65533
	// +kubebuilder:default=600
	// +optional
	ResumeTimeoutSeconds int32 `json:"resumeTimeoutSeconds,omitempty"`
}

// Elastic says whether Slurm sizes the set (autoscaling is on).
func (w *Worker) Elastic() bool { return w.Autoscaling != nil && w.Autoscaling.Enabled }

// NodeCount is how many Slurm nodes the set has in slurm.conf: maxSize when autoscaling is on,
// size otherwise. Only an elastic set may have fewer pods than nodes.
func (w *Worker) NodeCount() int32 {
	if w.Elastic() {
		return w.Autoscaling.MaxSize
	}
	return w.Size
}

// IdleTimeout is how long an elastic set's node stays up idle.
func (a *Autoscaling) IdleTimeout() time.Duration {
	if a.IdleTimeoutSeconds == 0 {
		return 600 * time.Second
	}
	return time.Duration(a.IdleTimeoutSeconds) * time.Second
}

// ResumeTimeout is Slurm's ResumeTimeout for an elastic set's nodes, in seconds.
func (a *Autoscaling) ResumeTimeout() int32 {
	if a.ResumeTimeoutSeconds == 0 {
		return 600
	}
	return a.ResumeTimeoutSeconds
}
