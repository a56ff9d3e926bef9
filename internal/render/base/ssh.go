package base

import (
	"strconv"

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

// hostKeyTypes are the SSH host key types sshd is given, in the order it offers them.
var hostKeyTypes = []string{"ed25519", "ecdsa", "rsa"}

// SSHDArgs are sshd's arguments on login and worker nodes: key-only logins, the shared host
// keys the cluster's Secret holds (hostKeys, keyed by file name), root's keys from the
// operator's ConfigMap, and each user's own ~/.ssh/authorized_keys.
func SSHDArgs(port int32, hostKeys map[string][]byte) []string {
	args := []string{"/usr/sbin/sshd", "-D", "-e", "-p", strconv.Itoa(int(port))}
	for _, t := range hostKeyTypes {
		if name := "ssh_host_" + t + "_key"; hostKeys[name] != nil {
			args = append(args, "-o", "HostKey="+SSHHostKeysDir+"/"+name)
		}
	}
	return append(args,
		"-o", "AuthorizedKeysFile=.ssh/authorized_keys",
		"-o", "AuthorizedKeysCommand=/usr/bin/cat "+AuthorizedKeysDir+"/%u",
		"-o", "AuthorizedKeysCommandUser=nobody",
		"-o", "PasswordAuthentication=no",
		"-o", "KbdInteractiveAuthentication=no",
		"-o", "PermitRootLogin=prohibit-password",
	)
}
