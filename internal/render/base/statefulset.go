package base

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// StatefulSetParams are what differs between the components' StatefulSets.
type StatefulSetParams struct {
	Component slurmv1alpha1.Component
	Replicas  int32
	Pod       corev1.PodSpec
	// SpoolClaim, when set, is the volumeClaimTemplate of the pods' spool (VolumeSpool): one
	// claim per pod (SpoolVolume).
	SpoolClaim *corev1.PersistentVolumeClaimSpec
	// PodAnnotations go on the pod template (for example the restart hash).
	PodAnnotations map[string]string
	// OnDelete leaves pods on their old template until they are deleted: the operator replaces
	// worker pods itself, one drained node at a time, so an update never kills a job.
	OnDelete bool
	// Name is the StatefulSet's name. Empty: the component's name.
	Name string
	// SetLabels go on the StatefulSet, its pods and its selector besides the component's: a
	// worker node set's label, which keeps the sets' pods apart.
	SetLabels map[string]string
	// Annotations go on the StatefulSet itself.
	Annotations map[string]string
}

// StatefulSet builds a component's StatefulSet. Pods start in parallel, and claims are kept
// when the StatefulSet is scaled down or deleted: the operator never deletes a PVC.
func StatefulSet(sc *slurmv1alpha1.SlurmCluster, p StatefulSetParams) *appsv1.StatefulSet {
	var claims []corev1.PersistentVolumeClaim
	if p.SpoolClaim != nil {
		claims = append(claims, corev1.PersistentVolumeClaim{
			TypeMeta:   TypeMeta("v1", "PersistentVolumeClaim"),
			ObjectMeta: metav1.ObjectMeta{Name: VolumeSpool},
			Spec:       *p.SpoolClaim.DeepCopy(),
		})
	}
	pod := *p.Pod.DeepCopy()
	Harden(&pod)
	strategy := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	if p.OnDelete {
		strategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	}
	name := p.Name
	if name == "" {
		name = sc.ComponentName(p.Component)
	}
	meta := ObjectMeta(sc, name, p.Component)
	selector, podLabels := SelectorLabels(sc, p.Component), Labels(sc, p.Component)
	for k, v := range p.SetLabels {
		meta.Labels[k], selector[k], podLabels[k] = v, v, v
	}
	if len(p.Annotations) > 0 {
		meta.Annotations = p.Annotations
	}
	return &appsv1.StatefulSet{
		TypeMeta:   TypeMeta("apps/v1", "StatefulSet"),
		ObjectMeta: meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To(p.Replicas),
			ServiceName:          sc.HeadlessServiceName(p.Component),
			Selector:             &metav1.LabelSelector{MatchLabels: selector},
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			UpdateStrategy:       strategy,
			VolumeClaimTemplates: claims,
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: p.PodAnnotations},
				Spec:       pod,
			},
		},
	}
}

// Harden sets what every Slurm pod gets: no service account token (no Slurm daemon talks to the
// Kubernetes API), the runtime's default seccomp profile (privileged containers are exempt by
// Kubernetes; docs/images.md lists them and why), and no privilege escalation in every container
// that is not privileged (the daemons start as root and drop their rights; none runs a setuid
// program to gain some).
func Harden(pod *corev1.PodSpec) {
	pod.AutomountServiceAccountToken = ptr.To(false)
	if pod.SecurityContext == nil {
		pod.SecurityContext = &corev1.PodSecurityContext{}
	}
	pod.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for i := range cs {
			c := &cs[i]
			if c.SecurityContext == nil {
				c.SecurityContext = &corev1.SecurityContext{}
			}
			if ptr.Deref(c.SecurityContext.Privileged, false) || c.SecurityContext.AllowPrivilegeEscalation != nil || addsSysAdmin(c.SecurityContext) {
				continue // (Kubernetes refuses no escalation together with CAP_SYS_ADMIN)
			}
			c.SecurityContext.AllowPrivilegeEscalation = ptr.To(false)
		}
	}
}

// Container fills in what every Slurm container shares: image pull policy.
func Container(sc *slurmv1alpha1.SlurmCluster, c corev1.Container) corev1.Container {
	c.ImagePullPolicy = corev1.PullPolicy(sc.Spec.Images.PullPolicy)
	return c
}

func addsSysAdmin(sc *corev1.SecurityContext) bool {
	if sc.Capabilities == nil {
		return false
	}
	for _, c := range sc.Capabilities.Add {
		if c == "SYS_ADMIN" || c == "CAP_SYS_ADMIN" {
			return true
		}
	}
	return false
}
