// Package login renders the SSH login nodes: a StatefulSet of login-0 … login-(size-1) running
// sshd chrooted in the jail, the Service users reach (LoadBalancer by default), a headless
// Service so login-N resolves for ssh -J, and root's authorized keys.
package login

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

const comp = slurmv1alpha1.ComponentLogin

// Service is what users ssh to. Its type, annotations and source ranges come from the spec.
func Service(in base.Input) *corev1.Service {
	sc := in.Cluster
	spec := sc.Spec.SlurmNodes.Login
	svc := &corev1.Service{
		TypeMeta:   base.TypeMeta("v1", "Service"),
		ObjectMeta: base.ObjectMeta(sc, sc.ComponentName(comp), comp),
		Spec: corev1.ServiceSpec{
			Type:     spec.Service.Type,
			Selector: base.SelectorLabels(sc, comp),
			Ports: []corev1.ServicePort{{
				Name: "ssh", Port: spec.Sshd.Port, TargetPort: intstr.FromString("ssh"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	if len(spec.Service.Annotations) > 0 {
		svc.Annotations = make(map[string]string, len(spec.Service.Annotations))
		for k, v := range spec.Service.Annotations {
			svc.Annotations[k] = v
		}
	}
	if spec.Service.Type == corev1.ServiceTypeLoadBalancer {
		svc.Spec.LoadBalancerSourceRanges = append([]string(nil), spec.Service.LoadBalancerSourceRanges...)
		// Keep the client's address visible to sshd, and send it only to nodes with a login pod.
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	return svc
}

// HeadlessService makes each login pod resolvable.
func HeadlessService(in base.Input) *corev1.Service {
	return base.HeadlessService(in.Cluster, comp, []corev1.ServicePort{
		{Name: "ssh", Port: in.Cluster.Spec.SlurmNodes.Login.Sshd.Port, TargetPort: intstr.FromString("ssh")},
	})
}

// AuthorizedKeysConfigMap holds root's authorized keys. sshd reads it through a directory
// mount, which the kubelet updates in place: changing keys restarts no pod.
func AuthorizedKeysConfigMap(in base.Input) *corev1.ConfigMap {
	sc := in.Cluster
	var b strings.Builder
	for _, k := range sc.Spec.SlurmNodes.Login.SSHRootPublicKeys {
		b.WriteString(strings.TrimSpace(string(k)) + "\n")
	}
	return &corev1.ConfigMap{
		TypeMeta:   base.TypeMeta("v1", "ConfigMap"),
		ObjectMeta: base.ObjectMeta(sc, sc.AuthorizedKeysConfigMapName(), comp),
		Data:       map[string]string{"root": b.String()},
	}
}

// loginPodmanStorage makes rootless Podman in login sessions store images as plain directories
// (vfs): its overlay storage needs /dev/fuse (login pods see no host devices) or an upper
// directory the kernel's overlay accepts, which the jail's /tmp on a network file system is not.
// Workers keep overlay: their /tmp is the node's and they see /dev/fuse.
const loginPodmanStorage = "STORAGE_DRIVER=vfs"

// StatefulSet runs sshd in the jail on each login node, with munge for Slurm's client commands.
func StatefulSet(in base.Input) (*appsv1.StatefulSet, error) {
	sc := in.Cluster
	spec := sc.Spec.SlurmNodes.Login
	jailVols, jailMounts, subBinds, err := base.JailVolumes(sc, spec.Volumes.Jail, spec.Volumes.JailSubMounts)
	if err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	volumes := append(base.CommonVolumes(sc), jailVols...)
	volumes = append(volumes,
		base.SSHHostKeysVolume(sc),
		base.AuthorizedKeysVolume(sc),
	)
	volumes = append(volumes, base.IdentityVolumes(sc)...)
	mounts := append(jailMounts,
		corev1.VolumeMount{Name: base.VolumeSlurmConfig, MountPath: base.ConfigMountDir, ReadOnly: true},
		corev1.VolumeMount{Name: base.VolumeMungeSocket, MountPath: slurmfacts.MungeSocketDir},
		base.SSHHostKeysMount,
		base.AuthorizedKeysMount,
	)
	mounts = append(mounts, base.IdentityMounts(sc)...)
	binds := append([]base.JailBind{
		{Source: base.ConfigMountDir, Target: slurmfacts.ConfDir, ReadOnly: true},
		base.SSHHostKeysBind,
		base.AuthorizedKeysBind,
	}, subBinds...)
	binds = append(binds, base.IdentityBinds(sc, true)...)
	// Clipped: the containers append their own mounts to copies.
	mounts, binds = slices.Clip(mounts), slices.Clip(binds)
	notice := ptr.Deref(spec.StopNoticeSeconds, DefaultStopNoticeSeconds)
	sshd := base.Container(sc, corev1.Container{
		Name:  "sshd",
		Image: sc.Spec.Images.Login,
		// Pivoted (a mount namespace whose root is the jail), not chrooted: the kernel refuses
		// user namespaces to chrooted processes, and sessions need them for rootless Podman.
		Command: base.WithEntrypointFlags(base.JailExecPivot(binds, append(base.SSHDArgsWithIdentity(sc, spec.Sshd.Port), "-o", "SetEnv="+loginPodmanStorage)...),
			base.IdentityEntrypointFlags(sc)...),
		Env:          base.PodIndexEnv(comp),
		Ports:        []corev1.ContainerPort{{Name: "ssh", ContainerPort: spec.Sshd.Port}},
		Resources:    spec.Resources.Core(),
		VolumeMounts: mounts,
		// Not privileged: the entrypoint binds /proc, /sys, /dev and the pod's files into the
		// jail (CAP_SYS_ADMIN, and no AppArmor profile, whose default denies mounts) and chroots
		// (CAP_SYS_CHROOT); sshd's PAM session writes the login UID (CAP_AUDIT_CONTROL). The
		// runtime's other default capabilities, its seccomp profile and its masked /proc stay,
		// and users' processes see no host devices (docs/security.md).
		SecurityContext: &corev1.SecurityContext{
			Capabilities:    &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN", "SYS_CHROOT", "AUDIT_CONTROL"}},
			AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined},
		},
		ReadinessProbe: base.TCPProbe("ssh", 5),
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{"/bin/sh", "-c", StopNoticeScript(notice)},
		}}},
	})
	// No dockerd here, whatever spec.docker says: login pods face users behind a public
	// address, and the docker group is root on the node.
	containers := []corev1.Container{sshd}
	pod := corev1.PodSpec{
		InitContainers: base.WithSSSDSidecar(sc, sc.Spec.Images.Login,
			[]corev1.Container{base.WaitForJail(sc, sc.Spec.Images.Login), base.MungeSidecar(sc, slurmfacts.MungeSocketDir)}),
		Containers: containers,
		Volumes:    volumes,
		DNSConfig:  base.DNSConfig(sc, sc.Namespace, in.ClusterDomain),
		// The notice, then sshd's own 30 s to end.
		TerminationGracePeriodSeconds: ptr.To(int64(notice) + 30),
	}
	base.Scheduling(sc, spec.K8sNodeFilterName, &pod)
	base.SpreadAcrossNodes(sc, comp, &pod)
	return base.StatefulSet(sc, base.StatefulSetParams{Component: comp, Replicas: spec.Size, Pod: pod,
		PodAnnotations: base.WithSSSDConfigHash(in, maps.Clone(spec.PodAnnotations))}), nil
}

// DefaultStopNoticeSeconds is spec.slurmNodes.login.stopNoticeSeconds when unset.
const DefaultStopNoticeSeconds = 60

// StopNoticeScript is the login container's preStop hook: it tells every ssh session with a
// terminal that the node stops, and in how many seconds (sshd's pseudo-terminals are the
// container's: the jail entrypoint binds its /dev), and waits until the notice is up or no
// session is left (OpenSSH runs one sshd-session process per connection, terminal or not). A
// terminal that appears meanwhile (a session still starting) is told when it appears. grep -q
// answers yes on a match even when another process's comm could not be read: processes come
// and go as the list is read (each readiness probe's connection is one), and without -q such a
// read error would read as "no session left" and end the notice early. date counts whole
// seconds, so the loop runs until the second after the notice's last: the notice is never
// short by the part of a second the hook started into (the grace period leaves 30 s over).
// PROC_DIR and PTS_DIR stand in for /proc and /dev/pts in tests.
func StopNoticeScript(notice int32) string {
	return fmt.Sprintf(`n=%d
proc=${PROC_DIR:-/proc} pts=${PTS_DIR:-/dev/pts}
[ "$n" -gt 0 ] || exit 0
sessions() { grep -qx sshd-session "$proc"/[0-9]*/comm 2>/dev/null; }
sessions || exit 0
end=$(($(date +%%s) + n))
told=" "
while :; do
	left=$((end - $(date +%%s)))
	[ "$left" -ge 0 ] && sessions || break
	for t in "$pts"/[0-9]*; do
		case $told in *" $t "*) continue ;; esac
		[ -e "$t" ] || continue
		printf '\r\n%%s\r\n' "*** This login node ($(hostname)) stops in $left seconds (an update or a move). Save your work; log in again through the login Service. ***" >"$t" 2>/dev/null
		told="$told$t "
	done
	sleep 1
done
`, notice)
}
