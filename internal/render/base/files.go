package base

import (
	"fmt"
	"strings"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// The daemons check the files they are given: munged refuses a key that is a symbolic link or
// readable by others, slurmdbd a slurmdbd.conf not owned by slurmfacts.SlurmUser with mode 0600, sshd keys
// in directories others can write. Secret and ConfigMap volumes are none of that (their files
// are links into ..data/, their modes follow defaultMode and fsGroup, their directories are not
// ownable), so Secrets are mounted under SecretsDir and installed, as regular files with the
// owner and mode each daemon demands, by the container's command before the daemon starts.

// PodFilesDir holds what the kubelet mounts into a login or worker container for the jail
// entrypoint to bind into the jail: nothing is mounted inside the shared jail volume itself.
const PodFilesDir = "/slurm-operator"

// Where pod files and Secrets are mounted in the containers.
const (
	// SecretsDir holds one directory per Secret volume.
	SecretsDir = PodFilesDir + "/secrets"
	// MungeKeySecretDir is where the munge key Secret is mounted.
	MungeKeySecretDir = SecretsDir + "/munge"
	// DatabasePasswordKey is the key of the password in the generated database password Secret.
	DatabasePasswordKey = "password"
	// JWTKeySecretDir is where the JWT key Secret is mounted.
	JWTKeySecretDir = SecretsDir + "/jwt"
	// SubMountsDir holds one directory per jail sub-mount.
	SubMountsDir = PodFilesDir + "/submounts"
	// ConfigMountDir is where login and worker containers mount the Slurm config, bound to
	// SlurmConfDir in the jail.
	ConfigMountDir = PodFilesDir + "/slurm"
)

// InstallFile is a shell command that installs a mounted file (following the kubelet's links)
// as a regular file with this owner and mode.
func InstallFile(src, dst, owner, mode string) string {
	return fmt.Sprintf("install -o %s -g %s -m %s %s %s", owner, owner, mode, src, dst)
}

// InstallDir is a shell command that makes a directory (an emptyDir's mountpoint) this owner's.
func InstallDir(dir, owner, mode string) string {
	return fmt.Sprintf("install -d -o %s -g %s -m %s %s", owner, owner, mode, dir)
}

// InstallJWTKey installs the JWT key for slurmctld and slurmdbd, readable by slurmfacts.SlurmUser alone.
func InstallJWTKey() string {
	return InstallFile(JWTKeySecretDir+"/"+slurmfacts.JWTKeyFile, slurmfacts.JWTKeyDir+"/"+slurmfacts.JWTKeyFile, slurmfacts.SlurmUser, "0400")
}

// Script joins shell commands into a `sh -c` script that stops at the first failure and ends by
// replacing the shell with the daemon.
func Script(steps ...string) string {
	return strings.Join(append([]string{"set -e"}, steps...), "\n")
}

// JailBind is one bind of the jail entrypoint: a path of the container onto a path of the jail.
type JailBind struct {
	Source   string
	Target   string
	ReadOnly bool
}

func (b JailBind) String() string {
	s := b.Source + ":" + b.Target
	if b.ReadOnly {
		s += ":ro"
	}
	return s
}

// JailExec is the command line that runs argv chrooted in the jail, with binds.
func JailExec(binds []JailBind, argv ...string) []string {
	out := []string{slurmfacts.JailEntrypoint}
	for _, b := range binds {
		out = append(out, "--bind", b.String())
	}
	return append(append(out, "--"), argv...)
}

// WithEntrypointFlags adds flags of the jail entrypoint to a command JailExec made, before its
// "--".
func WithEntrypointFlags(cmd []string, flags ...string) []string {
	if len(flags) == 0 {
		return cmd
	}
	for i, a := range cmd {
		if a == "--" {
			return append(append(append([]string{}, cmd[:i]...), flags...), cmd[i:]...)
		}
	}
	return cmd
}

// JailExecPivot is JailExec with the command in a mount namespace whose root is the jail
// (pivot_root instead of chroot), so that its children, such as slurmd's job steps, may make
// user namespaces (rootless Podman); the kernel refuses them to chrooted processes.
func JailExecPivot(binds []JailBind, argv ...string) []string {
	out := JailExec(binds, argv...)
	for i, a := range out {
		if a == "--" {
			return append(append(append([]string{}, out[:i]...), "--pivot"), out[i:]...)
		}
	}
	return out
}
