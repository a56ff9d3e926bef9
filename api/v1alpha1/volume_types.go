package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The volume sources are Kubernetes' own, field for field (kubectl explain
// pod.spec.volumes), with the bounds and formats Kubernetes checks on a pod's volumes, so that a
// spec the API server admits gives pods Kubernetes accepts.

// ClaimSource mounts an existing PersistentVolumeClaim of the cluster's namespace.
type ClaimSource struct {
	// ClaimName is the claim's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ClaimName string `json:"claimName"`

	// ReadOnly mounts the claim read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// NFSSource mounts an NFS export.
type NFSSource struct {
	// Server is the NFS server's name or address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^\S+$`
	Server string `json:"server"`

	// Path is the exported path on the server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`

	// ReadOnly mounts the export read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// HostPathSource mounts a directory or file of the Kubernetes node.
type HostPathSource struct {
	// Path is the absolute path on the node, without '..'.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:XValidation:rule="!(self + '/').contains('/../')",message="must not contain '..'"
	Path string `json:"path"`

	// Type is what must be at the path: DirectoryOrCreate, Directory, FileOrCreate, File,
	// Socket, CharDevice or BlockDevice; empty: anything.
	// +kubebuilder:validation:Enum="";DirectoryOrCreate;Directory;FileOrCreate;File;Socket;CharDevice;BlockDevice
	// +optional
	Type *corev1.HostPathType `json:"type,omitempty"`
}

// EmptyDirSource is a directory that lives as long as the pod.
type EmptyDirSource struct {
	// Medium: empty (the node's disk), Memory (a tmpfs) or HugePages (HugePages-<size>).
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^(Memory|HugePages(-\S+)?)?$`
	// +optional
	Medium string `json:"medium,omitempty"`

	// SizeLimit bounds the directory's size.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : !self.startsWith('-')",message="must not be negative"
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// CSISource is an inline volume of a CSI driver.
type CSISource struct {
	// Driver is the CSI driver's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Driver string `json:"driver"`

	// ReadOnly mounts the volume read-only.
	// +optional
	ReadOnly *bool `json:"readOnly,omitempty"`

	// FSType is the file system to mount (ext4, xfs, …), passed to the driver.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	FSType *string `json:"fsType,omitempty"`

	// VolumeAttributes are passed to the driver.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	VolumeAttributes map[string]string `json:"volumeAttributes,omitempty"`

	// NodePublishSecretRef names a Secret of the cluster's namespace passed to the driver.
	// +optional
	NodePublishSecretRef *SecretName `json:"nodePublishSecretRef,omitempty"`
}

// SecretName names a Secret of the cluster's namespace.
type SecretName struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// Core is the volume source as Kubernetes' type (the one source it sets).
func (v VolumeSource) Core() corev1.VolumeSource {
	var out corev1.VolumeSource
	switch {
	case v.PersistentVolumeClaim != nil:
		out.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName, ReadOnly: v.PersistentVolumeClaim.ReadOnly}
	case v.NFS != nil:
		out.NFS = &corev1.NFSVolumeSource{Server: v.NFS.Server, Path: v.NFS.Path, ReadOnly: v.NFS.ReadOnly}
	case v.HostPath != nil:
		out.HostPath = &corev1.HostPathVolumeSource{Path: v.HostPath.Path}
		if v.HostPath.Type != nil {
			t := *v.HostPath.Type
			out.HostPath.Type = &t
		}
	case v.EmptyDir != nil:
		out.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium(v.EmptyDir.Medium)}
		if v.EmptyDir.SizeLimit != nil {
			q := v.EmptyDir.SizeLimit.DeepCopy()
			out.EmptyDir.SizeLimit = &q
		}
	case v.CSI != nil:
		c := v.CSI.DeepCopy()
		out.CSI = &corev1.CSIVolumeSource{Driver: c.Driver, ReadOnly: c.ReadOnly, FSType: c.FSType, VolumeAttributes: c.VolumeAttributes}
		if c.NodePublishSecretRef != nil {
			out.CSI.NodePublishSecretRef = &corev1.LocalObjectReference{Name: c.NodePublishSecretRef.Name}
		}
	}
	return out
}
