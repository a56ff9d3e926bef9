package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
)

// Component names one part of a Slurm cluster. It is the value of the component label and the
// suffix of the part's Kubernetes object names.
type Component string

// The components of a Slurm cluster.
const (
	ComponentController Component = "controller"
	ComponentWorker     Component = "worker"
	ComponentLogin      Component = "login"
	ComponentAccounting Component = "accounting"
	ComponentExporter   Component = "exporter"
	ComponentJail       Component = "populate-jail"
	// ComponentActiveCheck labels the Kubernetes Jobs of active checks that run as such.
	ComponentActiveCheck Component = "active-check"
	// ComponentUpgradeBackup labels the Job that backs up the accounting database and the
	// controller's state before a change of Slurm release.
	ComponentUpgradeBackup Component = "upgrade-backup"
	// ComponentBackup labels the CronJob of scheduled backups (spec.backups) and its Jobs.
	ComponentBackup Component = "backup"
	// ComponentNodeNames gives the Slurm node names DNS names (NodeNamesServiceName).
	ComponentNodeNames Component = "nodes"
)

// Every child object's name comes from a method below, so names live in one place.

// ComponentName is the name of a component's StatefulSet (or Deployment) and of its Service.
func (c *SlurmCluster) ComponentName(comp Component) string {
	return c.Name + "-" + string(comp)
}

// HeadlessServiceName is the headless Service that gives each pod of a component a DNS name.
// The login component has a separate headless Service because its main Service is the
// LoadBalancer users reach.
func (c *SlurmCluster) HeadlessServiceName(comp Component) string {
	if comp == ComponentLogin {
		return c.Name + "-login-headless"
	}
	return c.ComponentName(comp)
}

// PodName is the name (and host name) of pod i of a component.
func (c *SlurmCluster) PodName(comp Component, i int32) string {
	return fmt.Sprintf("%s-%d", c.ComponentName(comp), i)
}

// SlurmNodeName is the Slurm name of node i of a component: worker-0, login-1, as users see it.
func SlurmNodeName(comp Component, i int32) string {
	return fmt.Sprintf("%s-%d", comp, i)
}

// WorkerSetStatefulSetName is the name of a worker set's StatefulSet: <cluster>-worker for
// spec.slurmNodes.worker, <cluster>-<set> for a node set.
func (c *SlurmCluster) WorkerSetStatefulSetName(set string) string {
	return c.Name + "-" + set
}

// NodeNamesServiceName is the headless Service whose endpoints carry the Slurm node names
// (worker-3, login-1) as DNS host names.
func (c *SlurmCluster) NodeNamesServiceName() string { return c.ComponentName(ComponentNodeNames) }

// ConfigMapName holds slurm.conf, gres.conf, cgroup.conf and plugstack.conf.
func (c *SlurmCluster) ConfigMapName() string { return c.Name + "-slurm-config" }

// AuthorizedKeysConfigMapName holds root's authorized_keys for the login nodes.
func (c *SlurmCluster) AuthorizedKeysConfigMapName() string { return c.Name + "-root-authorized-keys" }

// IdentityConfigMapName holds what the jail needs to resolve the directory's users through
// SSSD (spec.identity): nsswitch.conf, the sshd keys command and the login nodes' PAM.
func (c *SlurmCluster) IdentityConfigMapName() string { return c.Name + "-identity" }

// MungeKeySecretName holds the munge key shared by every Slurm daemon.
func (c *SlurmCluster) MungeKeySecretName() string { return c.Name + "-munge-key" }

// SSHHostKeysSecretName holds the SSH host keys of the login and worker nodes.
func (c *SlurmCluster) SSHHostKeysSecretName() string { return c.Name + "-ssh-host-keys" }

// ExporterTokenSecretName holds the exporter's short-lived token for the read-only Slurm user
// slurm-metrics; the operator renews it before it expires.
func (c *SlurmCluster) ExporterTokenSecretName() string { return c.Name + "-exporter-token" }

// JWTKeySecretName holds the HS256 key slurmctld and slurmrestd use for JWT authentication.
func (c *SlurmCluster) JWTKeySecretName() string { return c.Name + "-jwt-key" }

// SlurmdbdConfigSecretName holds slurmdbd.conf (it contains the database password).
func (c *SlurmCluster) SlurmdbdConfigSecretName() string { return c.Name + "-slurmdbd-conf" }

// DatabasePasswordSecretName holds the password of the accounting database user, when the
// operator creates the database through mariadb-operator.
func (c *SlurmCluster) DatabasePasswordSecretName() string { return c.Name + "-mariadb-password" }

// MariaDBName is the name of the mariadb-operator MariaDB object.
func (c *SlurmCluster) MariaDBName() string { return c.Name + "-mariadb" }

// UpgradeBackupJobName is the Job that takes the backup before an upgrade to the releases
// named by target (for example "accounting=26.05 controller=26.05"): one Job per target, kept
// as the record that the backup was taken.
func (c *SlurmCluster) UpgradeBackupJobName(target string) string {
	return c.ComponentName(ComponentUpgradeBackup) + "-" + ShortHash([]byte(target))[:8]
}

// BackupCronJobName is the CronJob of scheduled backups; its Jobs are named after it.
func (c *SlurmCluster) BackupCronJobName() string { return c.ComponentName(ComponentBackup) }

// PopulateJailJobName is the Job that fills the jail. Its name carries a hash of the image and
// the overwrite flag, so a changed request runs a new Job once; it is also the request's name
// in the jail's marker. Empty when spec.populateJail is unset.
func (c *SlurmCluster) PopulateJailJobName() string {
	pj := c.Spec.PopulateJail
	if pj == nil {
		return ""
	}
	return c.ComponentName(ComponentJail) + "-" + ShortHash([]byte(pj.Image), []byte(strconv.FormatBool(pj.Overwrite)))[:8]
}

// BusyPodDisruptionBudgetName refuses evictions of workers that run jobs.
func (c *SlurmCluster) BusyPodDisruptionBudgetName() string {
	return c.ComponentName(ComponentWorker) + "-busy"
}

// MariaDBRootPasswordSecretName is the root password Secret mariadb-operator generates.
func (c *SlurmCluster) MariaDBRootPasswordSecretName() string { return c.MariaDBName() + "-root" }

// MariaDBDatabaseObjectName is the mariadb-operator Database object of the accounting database.
func (c *SlurmCluster) MariaDBDatabaseObjectName() string { return c.MariaDBName() + "-acct-db" }

// MariaDBUserObjectName is the mariadb-operator User object of slurmdbd's account; its Grant
// has the same name.
func (c *SlurmCluster) MariaDBUserObjectName() string { return c.MariaDBName() + "-slurm" }

// SubMountVolumeName is the pod volume of the jail sub-mount with this name.
func SubMountVolumeName(subMount string) string { return "jail-submount-" + subMount }

// ShortHash is a short, stable hash of the given parts: the suffix of names that change with
// their content and the value of restart annotations.
func ShortHash(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		// Length-prefix each part so that ("ab","c") and ("a","bc") differ.
		var n [8]byte
		l := len(p)
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ActiveCheckJobName is the Kubernetes Job that runs an active check while the Slurm job holder
// holds its worker (the holder's ID is unique in the cluster and short enough for a label).
func (c *SlurmCluster) ActiveCheckJobName(holder int64) string {
	return c.Name + "-check-" + strconv.FormatInt(holder, 10)
}
