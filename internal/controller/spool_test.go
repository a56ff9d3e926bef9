package controller_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// haCluster is the minimal sample with a backup controller whose spool is the claim name of
// the given access mode, made before the cluster.
func haCluster(ctx SpecContext, name string, mode corev1.PersistentVolumeAccessMode) string {
	ns, _ := minimalCluster(ctx, name, 1, func(sc *slurmv1alpha1.SlurmCluster) {
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: sc.Namespace, Name: name + "-spool"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{mode},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		Expect(k8sClient.Create(ctx, pvc)).To(Succeed())
		sc.Spec.VolumeSources = append(sc.Spec.VolumeSources, slurmv1alpha1.VolumeSource{
			Name: "spool", PersistentVolumeClaim: &slurmv1alpha1.ClaimSource{ClaimName: pvc.Name},
		})
		sc.Spec.SlurmNodes.Controller.Size = 2
		sc.Spec.SlurmNodes.Controller.Volumes.Spool = &slurmv1alpha1.SpoolVolume{VolumeSourceName: "spool"}
	})
	return ns
}

var _ = Describe("a backup controller's spool", func() {
	It("is refused when its claim is not ReadWriteMany: nothing is rendered, and the status names the claim", func(ctx SpecContext) {
		ns := haCluster(ctx, "rwo", corev1.ReadWriteOnce)
		eventuallyCondition(ctx, ns, "rwo", "Degraded", slurmv1alpha1.ReasonSpoolNotShared,
			"spec.slurmNodes.controller.volumes.spool.volumeSourceName: claim rwo-spool has access modes [ReadWriteOnce], not ReadWriteMany")
		Consistently(func() bool {
			err := k8sClient.Get(ctx, key(ns, "rwo-controller"), &appsv1.StatefulSet{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(3 * time.Second).Should(BeTrue())
	})

	It("on a ReadWriteMany claim gives both controller pods that claim", func(ctx SpecContext) {
		ns := haCluster(ctx, "rwx", corev1.ReadWriteMany)
		sts := &appsv1.StatefulSet{}
		Eventually(func() error { return k8sClient.Get(ctx, key(ns, "rwx-controller"), sts) }).WithTimeout(timeout).Should(Succeed())
		Expect(*sts.Spec.Replicas).To(Equal(int32(2)))
		Expect(sts.Spec.VolumeClaimTemplates).To(BeEmpty())
		claims := []string{}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claims = append(claims, v.PersistentVolumeClaim.ClaimName)
			}
		}
		Expect(claims).To(ContainElement("rwx-spool"))
	})
})
