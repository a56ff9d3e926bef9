package render_test

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/fixtures"
)

// Every rendered object's name, and every pod volume that depends on the spec, comes from
// api/v1alpha1/names.go: a renderer that builds a name by hand fails here.
func TestEveryChildIsNamedInNamesGo(t *testing.T) {
	all, err := fixtures.SampleNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range all {
		t.Run(name, func(t *testing.T) {
			sc, err := fixtures.Sample(name)
			if err != nil {
				t.Fatal(err)
			}
			sc = base.WithDefaults(sc)
			known := map[string]bool{
				sc.ConfigMapName(): true, sc.AuthorizedKeysConfigMapName(): true, sc.MungeKeySecretName(): true,
				sc.SSHHostKeysSecretName(): true, sc.JWTKeySecretName(): true, sc.SlurmdbdConfigSecretName(): true,
				sc.DatabasePasswordSecretName(): true, sc.MariaDBName(): true, sc.MariaDBDatabaseObjectName(): true,
				sc.MariaDBUserObjectName(): true, sc.PopulateJailJobName(): true, sc.BusyPodDisruptionBudgetName(): true,
				sc.NodeNamesServiceName(): true, sc.ExporterTokenSecretName(): true, sc.BackupCronJobName(): true,
				sc.IdentityConfigMapName(): true,
			}
			if sc.SSSDEnabled() {
				known[sc.Spec.Identity.SSSD.ConfigSecretName] = true // the admin's, named in the spec
			}
			for _, c := range []slurmv1alpha1.Component{slurmv1alpha1.ComponentController, slurmv1alpha1.ComponentWorker,
				slurmv1alpha1.ComponentLogin, slurmv1alpha1.ComponentAccounting, slurmv1alpha1.ComponentExporter} {
				known[sc.ComponentName(c)], known[sc.HeadlessServiceName(c)] = true, true
			}
			for _, set := range sc.WorkerSets() {
				known[sc.WorkerSetStatefulSetName(set.Name)] = true
			}
			subMounts := map[string]bool{}
			for _, m := range append(sc.Spec.SlurmNodes.Worker.Volumes.JailSubMounts, sc.Spec.SlurmNodes.Login.Volumes.JailSubMounts...) {
				subMounts[slurmv1alpha1.SubMountVolumeName(m.Name)] = true
			}
			objects := 0
			for _, p := range renderSample(t, name) {
				for _, o := range p.Objects {
					objects++
					if !known[o.GetName()] {
						t.Errorf("%T %q is not named by a method of names.go", o, o.GetName())
					}
					var pod *corev1.PodSpec
					if s, ok := o.(*appsv1.StatefulSet); ok {
						pod = &s.Spec.Template.Spec
					}
					if pod == nil {
						continue
					}
					for _, v := range pod.Volumes {
						if strings.HasPrefix(v.Name, "jail-submount-") && !subMounts[v.Name] {
							t.Errorf("%s: volume %q is a sub-mount not named by SubMountVolumeName", o.GetName(), v.Name)
						}
						if v.Secret != nil && !known[v.Secret.SecretName] {
							t.Errorf("%s: volume %q mounts Secret %q, not named by names.go", o.GetName(), v.Name, v.Secret.SecretName)
						}
						if v.ConfigMap != nil && !known[v.ConfigMap.Name] {
							t.Errorf("%s: volume %q mounts ConfigMap %q, not named by names.go", o.GetName(), v.Name, v.ConfigMap.Name)
						}
					}
				}
			}
			if objects == 0 {
				t.Fatal("nothing rendered")
			}
		})
	}
}
