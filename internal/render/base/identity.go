package base

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// Users from the site's directory (spec.identity.sssd, docs/identity.md). SSSD runs in a
// sidecar of each pod that resolves users (slurmctld, login and worker nodes), from the pod's own
// Slurm image, configured from the admin's Secret. Its client side (libnss_sss, pam_sss,
// sss_ssh_authorizedkeys) travels in the worker image's Slurm bundle and is shown in the jail
// like Slurm is, in these clusters only (--sssd-client); the sidecar's sockets reach the jail through two emptyDirs bound at SSSD's
// standard paths, and nsswitch.conf is bound over the jail's, so sshd, slurmd and every job
// resolve the directory's users.
const (
	// SSSDPipesDir holds SSSD's sockets (nss, pam, ssh): the same path in the sidecar, in the
	// Slurm containers and in the jail.
	SSSDPipesDir = "/var/lib/sss/pipes"
	// SSSDCacheDir holds SSSD's memory cache, which clients read before they ask a socket.
	SSSDCacheDir = "/var/lib/sss/mc"
	// SSSDSecretDir is where the sidecar mounts the admin's Secret: sssd.conf and whatever it
	// names (a CA certificate, a password file).
	SSSDSecretDir = "/etc/sssd/secret"
	// SSSDConfigKey is the key of the admin's Secret that holds sssd.conf.
	SSSDConfigKey = "sssd.conf"
	// AnnotationSSSDConfigHash on a pod template is the hash of the admin's SSSD Secret and of
	// the identity ConfigMap's files: a change to either rolls the pods that run SSSD.
	AnnotationSSSDConfigHash = "slurm.hpc.dev/sssd-config-hash"

	// AnnotationSSSDSecretHash on the controller StatefulSet is the admin's Secret's own hash
	// that its pods were rendered with: while the Secret cannot be read, the cluster is rendered
	// with it, and no pod rolls.
	AnnotationSSSDSecretHash = "slurm.hpc.dev/sssd-secret-hash"

	// IdentityNSSwitchKey, IdentityKeysCommandKey and IdentityLoginPAMKey are the files of the
	// identity ConfigMap.
	IdentityNSSwitchKey    = "nsswitch.conf"
	IdentityKeysCommandKey = "authorized-keys-command"
	IdentityLoginPAMKey    = "sshd-login"

	// AuthorizedKeysCommandPath is where, in the jail, sshd finds the command that prints a
	// user's keys with a directory: root's from the operator's ConfigMap, then SSSD's.
	AuthorizedKeysCommandPath = "/etc/ssh/slurm-operator/authorized-keys-command"

	identityMountDir  = PodFilesDir + "/identity"
	volumeSSSDPipes   = "sssd-pipes"
	volumeSSSDCache   = "sssd-cache"
	volumeSSSDSecret  = "sssd-config"
	volumeIdentity    = "identity"
	sssdContainerName = "sssd"
)

// IdentityVolumes are the volumes of a pod that runs SSSD; none without spec.identity.
func IdentityVolumes(sc *slurmv1alpha1.SlurmCluster) []corev1.Volume {
	if !sc.SSSDEnabled() {
		return nil
	}
	return []corev1.Volume{
		{Name: volumeSSSDPipes, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: volumeSSSDCache, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: volumeSSSDSecret, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: sc.Spec.Identity.SSSD.ConfigSecretName, DefaultMode: ptr.To[int32](0o400),
		}}},
		{Name: volumeIdentity, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: sc.IdentityConfigMapName()},
			DefaultMode:          ptr.To[int32](0o755),
		}}},
	}
}

// IdentityMounts are what a Slurm container of a login or worker pod that runs SSSD mounts:
// the sidecar's sockets and cache, and the identity ConfigMap (to bind into the jail). None
// without spec.identity.
func IdentityMounts(sc *slurmv1alpha1.SlurmCluster) []corev1.VolumeMount {
	if !sc.SSSDEnabled() {
		return nil
	}
	return append(sssdMounts(), corev1.VolumeMount{Name: volumeIdentity, MountPath: identityMountDir, ReadOnly: true})
}

// sssdMounts are the sidecar's sockets (shared) and memory cache (read-only) in a Slurm
// container.
func sssdMounts() []corev1.VolumeMount {
	return []corev1.VolumeMount{
		{Name: volumeSSSDPipes, MountPath: SSSDPipesDir},
		{Name: volumeSSSDCache, MountPath: SSSDCacheDir, ReadOnly: true},
	}
}

// IdentityBinds show SSSD in the jail of a login or worker node: its sockets and cache at
// their paths, nsswitch.conf asking SSSD after the jail's files, and, with sshKeys, the command
// sshd asks for keys. With login, the login nodes' PAM for sshd, which applies the directory's
// access rules and makes a user's home at first login (createHomeDirectories). None without
// spec.identity.
func IdentityBinds(sc *slurmv1alpha1.SlurmCluster, login bool) []JailBind {
	if !sc.SSSDEnabled() {
		return nil
	}
	binds := []JailBind{
		{Source: SSSDPipesDir, Target: SSSDPipesDir},
		{Source: SSSDCacheDir, Target: SSSDCacheDir, ReadOnly: true},
		{Source: identityMountDir + "/" + IdentityNSSwitchKey, Target: "/etc/nsswitch.conf", ReadOnly: true},
	}
	if sc.SSSDSSHKeys() {
		binds = append(binds, JailBind{Source: identityMountDir + "/" + IdentityKeysCommandKey, Target: AuthorizedKeysCommandPath, ReadOnly: true})
	}
	if login {
		binds = append(binds, JailBind{Source: identityMountDir + "/" + IdentityLoginPAMKey, Target: "/etc/pam.d/sshd", ReadOnly: true})
	}
	return binds
}

// IdentityEntrypointFlags are the jail entrypoint's flags of a login or worker pod with
// spec.identity: show SSSD's client side from the image's bundle (its NSS and PAM modules,
// sss_ssh_authorizedkeys). Without it the jail's own files of those paths are left alone.
func IdentityEntrypointFlags(sc *slurmv1alpha1.SlurmCluster) []string {
	if !sc.SSSDEnabled() {
		return nil
	}
	return []string{"--sssd-client"}
}

// ControllerIdentityMounts are slurmctld's: the sidecar's sockets and cache, and nsswitch.conf
// asking SSSD after the image's files (slurmctld resolves users and groups for job credentials
// and AllowGroups). None without spec.identity.
func ControllerIdentityMounts(sc *slurmv1alpha1.SlurmCluster) []corev1.VolumeMount {
	if !sc.SSSDEnabled() {
		return nil
	}
	return append(sssdMounts(), corev1.VolumeMount{Name: volumeIdentity, MountPath: "/etc/nsswitch.conf", SubPath: IdentityNSSwitchKey, ReadOnly: true})
}

// SSSDSidecar runs SSSD from image (a Slurm image: the worker's carries it) as a sidecar that
// starts before the pod's Slurm containers and is ready once its NSS socket answers.
func SSSDSidecar(sc *slurmv1alpha1.SlurmCluster, image string) corev1.Container {
	script := Script(
		// The sockets' folder is an emptyDir: SSSD wants its private folder in it.
		"install -d -m 0755 "+SSSDPipesDir,
		"install -d -m 0700 "+SSSDPipesDir+"/private",
		"install -d -m 0755 "+SSSDCacheDir+" /var/lib/sss/db /var/log/sssd",
		// SSSD reads its configuration only from a root-owned file of mode 0600: the Secret's
		// is a link into the kubelet's folder.
		InstallFile(SSSDSecretDir+"/"+SSSDConfigKey, "/etc/sssd/sssd.conf", "root", "0600"),
		"exec /usr/sbin/sssd -i --logger=stderr",
	)
	// Root, and the owner of every file it touches (its folders, the emptyDirs, the copied
	// configuration): no right over others' files. SETUID and SETGID stay for the helpers some
	// providers start under a user's ids (krb5_child).
	return socketSidecar(sc, sssdContainerName, image, script, SSSDPipesDir+"/nss", 60,
		[]corev1.VolumeMount{
			{Name: volumeSSSDSecret, MountPath: SSSDSecretDir, ReadOnly: true},
			{Name: volumeSSSDPipes, MountPath: SSSDPipesDir},
			{Name: volumeSSSDCache, MountPath: SSSDCacheDir},
		}, "SETUID", "SETGID")
}

// WithSSSDSidecar adds the SSSD sidecar after the pod's other init containers (the munge
// sidecar among them), when the cluster has spec.identity.
func WithSSSDSidecar(sc *slurmv1alpha1.SlurmCluster, image string, inits []corev1.Container) []corev1.Container {
	if !sc.SSSDEnabled() {
		return inits
	}
	return append(inits, SSSDSidecar(sc, image))
}

// WithSSSDConfigHash adds the hash of the admin's SSSD Secret and of the identity ConfigMap's
// files to a pod template's annotations.
func WithSSSDConfigHash(in Input, annotations map[string]string) map[string]string {
	if !in.Cluster.SSSDEnabled() || in.Keys.SSSDConfigHash == "" {
		return annotations
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	// The files are bound one by one (and slurmctld's by subPath): a change to them reaches a
	// pod only through a new one.
	files := IdentityFiles(in.Cluster)
	parts := [][]byte{[]byte(in.Keys.SSSDConfigHash)}
	for _, k := range slices.Sorted(maps.Keys(files)) {
		parts = append(parts, []byte(k), []byte(files[k]))
	}
	annotations[AnnotationSSSDConfigHash] = slurmv1alpha1.ShortHash(parts...)
	return annotations
}

// SSHDArgsWithIdentity are SSHDArgs with, when sshd asks SSSD for keys, the command that
// prints root's keys from the operator's ConfigMap and the directory's through SSSD.
func SSHDArgsWithIdentity(sc *slurmv1alpha1.SlurmCluster, port int32) []string {
	if !sc.SSSDSSHKeys() {
		return SSHDArgs(port)
	}
	return sshdArgs(port, AuthorizedKeysCommandPath+" %u")
}

// identityNSSwitch asks SSSD for users and groups after the jail's own files, so that root, the
// system users and users made by adduser keep working and win over a directory entry of the
// same name.
const identityNSSwitch = `# From the slurm-operator (spec.identity): the jail's files first, then SSSD.
passwd:         files sss
group:          files sss
shadow:         files sss
gshadow:        files
hosts:          files dns
networks:       files
protocols:      db files
services:       db files
ethers:         db files
rpc:            db files
netgroup:       files sss
`

// identityKeysCommand is sshd's AuthorizedKeysCommand with a directory. A user of the jail's
// own files gets only what the operator's ConfigMap holds for them (root's keys), and SSSD is
// not asked: a directory entry of the same name must not bring its keys to a local account,
// and root must log in while SSSD is down. Anyone else gets the directory's keys through SSSD.
// The user name is an argument, never part of a command line the shell parses, and a name
// with a slash is refused.
const identityKeysCommand = `#!/bin/sh
# From the slurm-operator (spec.identity.sssd.sshKeys): sshd's AuthorizedKeysCommand.
[ $# -eq 1 ] || exit 1
case $1 in */*|.*|"") exit 1 ;; esac
if getent -s files passwd -- "$1" >/dev/null; then
	if [ -r "` + AuthorizedKeysDir + `/$1" ]; then
		cat -- "` + AuthorizedKeysDir + `/$1"
	fi
	exit 0
fi
exec /usr/bin/sss_ssh_authorizedkeys -- "$1"
`

// identityLoginPAM is a login node's sshd PAM with a directory: Debian's, with the directory's
// access rules (pam_sss account: access_provider, ldap_access_filter, expired and locked
// accounts) for its users, and, with createHomeDirectories, pam_mkhomedir making a directory
// user's home at first login. The jail's own users skip pam_sss (pam_localuser), so root logs
// in while SSSD is down. pam_systemd is left out: the jail has no systemd.
func identityLoginPAM(homes bool) string {
	mkhomedir := ""
	if homes {
		mkhomedir = "session    optional     pam_mkhomedir.so skel=/etc/skel umask=0077\n"
	}
	return `# From the slurm-operator (spec.identity.sssd): the login nodes' /etc/pam.d/sshd.
@include common-auth
account    required     pam_nologin.so
@include common-account
account    [success=1 default=ignore]                    pam_localuser.so
account    [default=bad success=ok user_unknown=ignore]  pam_sss.so
session    required     pam_loginuid.so
session    optional     pam_keyinit.so force revoke
session    required     pam_unix.so
` + mkhomedir + `session    required     pam_limits.so
session    required     pam_env.so
session    required     pam_env.so envfile=/etc/default/locale
@include common-password
`
}

// IdentityFiles are the identity ConfigMap's files (spec.identity).
func IdentityFiles(sc *slurmv1alpha1.SlurmCluster) map[string]string {
	return map[string]string{
		IdentityNSSwitchKey:    identityNSSwitch,
		IdentityKeysCommandKey: identityKeysCommand,
		IdentityLoginPAMKey:    identityLoginPAM(sc.SSSDCreatesHomes()),
	}
}

// SSSDSecretAnnotations are the controller StatefulSet's annotations with spec.identity: the
// hash of the Secret its pods were rendered with.
func SSSDSecretAnnotations(in Input) map[string]string {
	if !in.Cluster.SSSDEnabled() || in.Keys.SSSDConfigHash == "" {
		return nil
	}
	return map[string]string{AnnotationSSSDSecretHash: in.Keys.SSSDConfigHash}
}
