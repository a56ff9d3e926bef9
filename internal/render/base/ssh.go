package base

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// sshd runs chrooted in the jail on login and worker nodes, with the cluster's shared host keys.

const (
	// HostKeysMountDir is where login and worker containers mount the SSH host keys Secret, bound
	// into the jail at SSHHostKeysDir.
	HostKeysMountDir = PodFilesDir + "/ssh-host-keys"
	// SSHHostKeysDir is where the SSH host keys are bound inside the jail.
	SSHHostKeysDir = "/etc/ssh/slurm-operator/host-keys"
	// AuthorizedKeysDir is where root's authorized keys are bound inside the jail (login nodes).
	// sshd reads them through AuthorizedKeysCommand: its StrictModes check of AuthorizedKeysFile
	// would refuse a ConfigMap volume, whose directories are not ownable, and a copy would not
	// follow key changes.
	AuthorizedKeysDir = "/etc/ssh/slurm-operator/authorized-keys"
)

// SSHHostKeysVolume is the pod volume of the SSH host keys Secret, readable by root alone.
func SSHHostKeysVolume(sc *slurmv1alpha1.SlurmCluster) corev1.Volume {
	return corev1.Volume{Name: VolumeSSHHostKeys, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: sc.SSHHostKeysSecretName(), DefaultMode: ptr.To[int32](0o400)},
	}}
}

// SSHHostKeysMount mounts the host keys into an sshd container, for SSHHostKeysBind.
var SSHHostKeysMount = corev1.VolumeMount{Name: VolumeSSHHostKeys, MountPath: HostKeysMountDir, ReadOnly: true}

// SSHHostKeysBind puts the mounted host keys where SSHDArgs has sshd read them.
var SSHHostKeysBind = JailBind{Source: HostKeysMountDir, Target: SSHHostKeysDir, ReadOnly: true}

// HostKeyFiles are the SSH host keys sshd is given, in the order it offers them. A new cluster's
// Secret holds the first two; one made before RSA keys were dropped holds all three. sshd skips
// a file that is not there (it logs it) and offers the others; the list is fixed so that what
// the Secret holds never changes a pod template.
var HostKeyFiles = []string{"ssh_host_ed25519_key", "ssh_host_ecdsa_key", "ssh_host_rsa_key"}

// CheckHostKeys refuses a host key Secret sshd could use none of: sshd would fall back to the
// image's own keys, or exit.
func CheckHostKeys(keys map[string][]byte) error {
	for _, f := range HostKeyFiles {
		if len(keys[f]) > 0 {
			return nil
		}
	}
	return fmt.Errorf("the SSH host keys Secret holds none of %s", strings.Join(HostKeyFiles, ", "))
}

// SSHDArgs are sshd's arguments on login and worker nodes: key-only logins, the shared host
// keys, root's keys from the operator's ConfigMap, and each user's own ~/.ssh/authorized_keys.
func SSHDArgs(port int32) []string {
	return sshdArgs(port, "/usr/bin/cat "+AuthorizedKeysDir+"/%u")
}

// sshdArgs are SSHDArgs with keysCommand as sshd's AuthorizedKeysCommand.
func sshdArgs(port int32, keysCommand string) []string {
	args := []string{"/usr/sbin/sshd", "-D", "-e", "-p", strconv.Itoa(int(port))}
	for _, f := range HostKeyFiles {
		args = append(args, "-o", "HostKey="+SSHHostKeysDir+"/"+f)
	}
	return append(args,
		"-o", "AuthorizedKeysFile=.ssh/authorized_keys",
		"-o", "AuthorizedKeysCommand="+keysCommand,
		"-o", "AuthorizedKeysCommandUser=nobody",
		"-o", "PasswordAuthentication=no",
		"-o", "KbdInteractiveAuthentication=no",
		"-o", "PermitRootLogin=prohibit-password",
	)
}

// authorizedKeysMountDir is where login and worker sshd containers mount root's authorized
// keys, to bind them into the jail.
const authorizedKeysMountDir = PodFilesDir + "/authorized-keys"

const volumeAuthorizedKeys = "authorized-keys"

// AuthorizedKeysVolume is the pod volume of root's authorized keys (sshRootPublicKeys).
func AuthorizedKeysVolume(sc *slurmv1alpha1.SlurmCluster) corev1.Volume {
	return corev1.Volume{Name: volumeAuthorizedKeys, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: sc.AuthorizedKeysConfigMapName()},
			DefaultMode:          ptr.To[int32](0o444),
			// A worker need not wait for it: root's keys are the login component's.
			Optional: ptr.To(true),
		},
	}}
}

// AuthorizedKeysMount mounts root's authorized keys as a directory (never subPath): the kubelet
// updates it in place when keys change, so no pod restarts.
var AuthorizedKeysMount = corev1.VolumeMount{Name: volumeAuthorizedKeys, MountPath: authorizedKeysMountDir, ReadOnly: true}

// AuthorizedKeysBind places root's authorized keys where sshd's AuthorizedKeysCommand reads them.
var AuthorizedKeysBind = JailBind{Source: authorizedKeysMountDir, Target: AuthorizedKeysDir, ReadOnly: true}
