// Package jail renders the Job that populates the jail volume once from the populate image.
// The Job's script leaves a marker in the jail and leaves a marked jail alone unless
// spec.populateJail.overwrite is true; a jail with data but no marker is never overwritten.
package jail

import (
	_ "embed"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// PopulateScript is the script the populate Job runs.
//
//go:embed populate.sh
var PopulateScript string

// Job renders the populate Job, or nil when spec.populateJail is unset. Its name carries a hash
// of the image and the overwrite flag, so a changed request runs a new Job once.
func Job(in base.Input) (*batchv1.Job, error) {
	sc := in.Cluster
	pj := sc.Spec.PopulateJail
	if pj == nil || pj.Image == "" {
		return nil, nil
	}
	jailVol, err := base.VolumeSourceVolume(sc, sc.Spec.SlurmNodes.Worker.Volumes.Jail.VolumeSourceName, base.VolumeJail)
	if err != nil {
		return nil, fmt.Errorf("populate jail: %w", err)
	}
	pod := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyOnFailure,
		Containers: []corev1.Container{base.Container(sc, corev1.Container{
			Name:    "populate",
			Image:   pj.Image,
			Command: []string{"/bin/sh", "-c", PopulateScript},
			Env: []corev1.EnvVar{
				{Name: "SOURCE", Value: "/jail"},
				{Name: "JAIL", Value: base.JailDir},
				{Name: "MARKER", Value: slurmfacts.JailMarkerFile},
				{Name: "OVERWRITE", Value: strconv.FormatBool(pj.Overwrite)},
				{Name: "REQUEST", Value: sc.PopulateJailJobName()},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: base.VolumeJail, MountPath: base.JailDir}},
		})},
		Volumes: []corev1.Volume{jailVol},
	}
	base.Scheduling(sc, pj.K8sNodeFilterName, &pod)
	base.Harden(&pod)
	meta := base.ObjectMeta(sc, sc.PopulateJailJobName(), slurmv1alpha1.ComponentJail)
	return &batchv1.Job{
		TypeMeta:   base.TypeMeta("batch/v1", "Job"),
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](6),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: base.ObjectMeta(sc, "", slurmv1alpha1.ComponentJail),
				Spec:       pod,
			},
		},
	}, nil
}
