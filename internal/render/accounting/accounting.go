// Package accounting renders slurmdbd (StatefulSet, Service, slurmdbd.conf in a Secret) and,
// with spec.slurmNodes.accounting.mariadbOperator.enabled, the mariadb-operator objects of its
// database (MariaDB, Database, User, Grant) as unstructured objects.
package accounting

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

const comp = slurmv1alpha1.ComponentAccounting

// Database defaults when the operator creates the database.
const (
	DatabaseName = "slurm_acct_db"
	// DatabaseUser is the MariaDB account slurmdbd connects as (not a Unix user).
	DatabaseUser = "slurm"
)

const volumeDBDConf = "slurmdbd-conf"

// dbdConfSecretDir is where the slurmdbd.conf Secret is mounted, to be installed from.
const dbdConfSecretDir = base.SecretsDir + "/slurmdbd"

// DatabaseFor says where slurmdbd's database is. password is the external database's password
// (read from the user's Secret) or the generated one.
func DatabaseFor(sc *slurmv1alpha1.SlurmCluster, password []byte) base.Database {
	acc := sc.Spec.SlurmNodes.Accounting
	if db := acc.ExternalDB; db != nil {
		return base.Database{Host: db.Host, Port: db.Port, User: db.User, Password: string(password), Name: db.Database}
	}
	return base.Database{Host: sc.MariaDBName(), Port: slurmfacts.MariaDBPort, User: DatabaseUser, Password: string(password), Name: DatabaseName}
}

// ConfigSecret holds slurmdbd.conf; it is a Secret because it holds the database password.
func ConfigSecret(in base.Input) *corev1.Secret {
	sc := in.Cluster
	return base.Secret(base.ObjectMeta(sc, sc.SlurmdbdConfigSecretName(), comp),
		map[string][]byte{slurmconf.SlurmdbdConf: []byte(slurmconf.SlurmdbdConfig(in))})
}

// Service is how slurmctld reaches slurmdbd (AccountingStorageHost).
func Service(in base.Input) *corev1.Service {
	return base.Service(in.Cluster, comp, []corev1.ServicePort{
		{Name: "slurmdbd", Port: slurmfacts.SlurmdbdPort, TargetPort: intstr.FromString("slurmdbd")},
	})
}

// StatefulSet runs slurmdbd. slurmdbd reads its config only at start, so the pod template
// carries a hash of slurmdbd.conf: a change of database rolls the pod, and nothing else does.
func StatefulSet(in base.Input) *appsv1.StatefulSet {
	sc := in.Cluster
	spec := sc.Spec.SlurmNodes.Accounting
	volumes := append(base.CommonVolumes(sc),
		corev1.Volume{Name: volumeDBDConf, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: sc.SlurmdbdConfigSecretName(), DefaultMode: ptr.To[int32](0o400),
		}}},
		base.JWTKeyVolume(sc),
	)
	pod := corev1.PodSpec{
		InitContainers: []corev1.Container{base.MungeSidecar(sc, slurmfacts.MungeSocketDir)},
		Containers: []corev1.Container{base.Container(sc, corev1.Container{
			Name:  "slurmdbd",
			Image: sc.Spec.Images.Accounting,
			// slurmdbd refuses a slurmdbd.conf that is not SlurmUser's with mode 0600; it starts
			// as root, reads it, and runs as SlurmUser.
			Command: []string{"/bin/sh", "-c", base.Script(
				base.InstallFile(dbdConfSecretDir+"/"+slurmconf.SlurmdbdConf, slurmfacts.ConfDir+"/"+slurmconf.SlurmdbdConf, slurmfacts.SlurmUser, "0600"),
				base.InstallJWTKey(),
				"exec slurmdbd -D",
			)},
			Ports: []corev1.ContainerPort{{Name: "slurmdbd", ContainerPort: slurmfacts.SlurmdbdPort}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: volumeDBDConf, MountPath: dbdConfSecretDir, ReadOnly: true},
				{Name: base.VolumeMungeSocket, MountPath: slurmfacts.MungeSocketDir},
				{Name: base.VolumeJWTKey, MountPath: base.JWTKeySecretDir, ReadOnly: true},
			},
			Resources:      spec.Resources.Core(),
			ReadinessProbe: base.TCPProbe("slurmdbd", 5),
		})},
		Volumes:   volumes,
		DNSConfig: base.DNSConfig(sc, sc.Namespace, in.ClusterDomain),
	}
	base.Scheduling(sc, spec.K8sNodeFilterName, &pod)
	pod.PriorityClassName = in.ControlPlanePriorityClass
	return base.StatefulSet(sc, base.StatefulSetParams{
		Component: comp, Replicas: 1, Pod: pod,
		PodAnnotations: map[string]string{base.AnnotationRestartHash: slurmv1alpha1.ShortHash([]byte(slurmconf.SlurmdbdConfig(in)))},
	})
}

// PasswordSecret holds the generated password of the database user (mariadb-operator only).
func PasswordSecret(in base.Input) *corev1.Secret {
	sc := in.Cluster
	return base.Secret(base.ObjectMeta(sc, sc.DatabasePasswordSecretName(), comp),
		map[string][]byte{base.DatabasePasswordKey: in.Keys.DatabasePassword})
}
