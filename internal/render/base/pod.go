package base

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// Paths inside the containers. The images in images/ follow this contract.
const (
	// JailDir is where login and worker pods mount the jail; their daemons run chrooted in it.
	JailDir = "/mnt/jail"
)

// Volume names used in pod specs.
const (
	VolumeSlurmConfig = "slurm-config"
	VolumeMungeKey    = "munge-key"
	VolumeMungeSocket = "munge-socket"
	VolumeJWTKey      = "jwt-key"
	VolumeJail        = "jail"
	VolumeSpool       = "spool"
	VolumeSSHHostKeys = "ssh-host-keys"
)

// Scheduling applies the named k8sNodeFilter to a pod spec (an empty name leaves the pod free),
// and the cluster's image pull secrets, which every pod of the cluster takes.
func Scheduling(sc *slurmv1alpha1.SlurmCluster, filterName string, spec *corev1.PodSpec) {
	PullSecrets(sc, spec)
	f := NodeFilter(sc, filterName)
	if filterName == "" || f == nil {
		return
	}
	if len(f.NodeSelector) > 0 {
		spec.NodeSelector = make(map[string]string, len(f.NodeSelector))
		for k, v := range f.NodeSelector {
			spec.NodeSelector[k] = string(v)
		}
	}
	if a := f.Affinity.Core(); a != nil {
		spec.Affinity = a
	}
	for _, t := range f.Tolerations {
		spec.Tolerations = append(spec.Tolerations, t.Core())
	}
}

// PullSecrets lists spec.images.pullSecrets on the pod: every pod of the cluster pulls the
// cluster's images, so every pod gets them (they ride along with the scheduling every pod takes).
func PullSecrets(sc *slurmv1alpha1.SlurmCluster, spec *corev1.PodSpec) {
	for _, s := range sc.Spec.Images.PullSecrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s.Name})
	}
}

// SpreadAcrossNodes asks the scheduler to put the component's pods on different Kubernetes
// nodes when it can (a preferred pod anti-affinity on the node's hostname, added to what the
// node filter asks): two controllers, or two login nodes, on one Kubernetes node would fail
// together. Preferred, not required, so a cluster on fewer nodes than pods still runs.
func SpreadAcrossNodes(sc *slurmv1alpha1.SlurmCluster, comp slurmv1alpha1.Component, spec *corev1.PodSpec) {
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.PodAntiAffinity == nil {
		spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	pa := spec.Affinity.PodAntiAffinity
	pa.PreferredDuringSchedulingIgnoredDuringExecution = append(pa.PreferredDuringSchedulingIgnoredDuringExecution, corev1.WeightedPodAffinityTerm{
		Weight: 100,
		PodAffinityTerm: corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(sc, comp)},
			TopologyKey:   corev1.LabelHostname,
		},
	})
}

// MungeSidecar runs munged next to a Slurm daemon, as a native sidecar (an init container that
// keeps running), so munged is up before the daemon starts and stops after it. munged refuses a
// key that is a symbolic link or readable by anyone but itself, and a socket directory others
// can write: the key is installed from the Secret as a regular 0400 file owned by munge, the
// socket directory is made munge's, and munged then runs as munge.
func MungeSidecar(sc *slurmv1alpha1.SlurmCluster, socketDir string) corev1.Container {
	script := Script(
		InstallDir(socketDir, slurmfacts.MungeUser, "0755"),
		InstallFile(MungeKeySecretDir+"/"+slurmfacts.MungeKeyFile, slurmfacts.MungeKeyDir+"/"+slurmfacts.MungeKeyFile, slurmfacts.MungeUser, "0400"),
		"exec setpriv --reuid="+slurmfacts.MungeUser+" --regid="+slurmfacts.MungeUser+" --init-groups munged --foreground"+
			" --key-file="+slurmfacts.MungeKeyDir+"/"+slurmfacts.MungeKeyFile+
			" --socket="+socketDir+"/munge.socket.2"+
			" --seed-file="+socketDir+"/munged.seed"+
			" --pid-file="+socketDir+"/munged.pid"+
			" --num-threads=4",
	)
	// Only what the script needs: change owners and modes, read the root-owned key, and
	// become munge.
	return socketSidecar(sc, "munge", sc.Spec.Images.Munge, script, socketDir+"/munge.socket.2", 30,
		[]corev1.VolumeMount{
			{Name: VolumeMungeKey, MountPath: MungeKeySecretDir, ReadOnly: true},
			{Name: VolumeMungeSocket, MountPath: socketDir},
		}, "CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID")
}

// socketSidecar is a native sidecar (an init container that keeps running) that runs script
// from image with mounts, holding only the capabilities named, and is started once socket
// exists (checked every second, failures times): the pod's other containers start after it.
func socketSidecar(sc *slurmv1alpha1.SlurmCluster, name, image, script, socket string, failures int32,
	mounts []corev1.VolumeMount, caps ...corev1.Capability) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           image,
		ImagePullPolicy: corev1.PullPolicy(sc.Spec.Images.PullPolicy),
		Command:         []string{"/bin/sh", "-c", script},
		RestartPolicy:   ptr.To(corev1.ContainerRestartPolicyAlways),
		VolumeMounts:    mounts,
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-S", socket}}},
			PeriodSeconds:    1,
			FailureThreshold: failures,
		},
		SecurityContext: &corev1.SecurityContext{
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
			AllowPrivilegeEscalation: ptr.To(false),
		},
		Resources: corev1.ResourceRequirements{},
	}
}

// CommonVolumes are the volumes every Slurm pod has: the config, the munge key and socket.
func CommonVolumes(sc *slurmv1alpha1.SlurmCluster) []corev1.Volume {
	return []corev1.Volume{
		// 0755: the health check script in it is slurmd's HealthCheckProgram.
		{Name: VolumeSlurmConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: sc.ConfigMapName()},
			DefaultMode:          ptr.To[int32](0o755),
		}}},
		{Name: VolumeMungeKey, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: sc.MungeKeySecretName(), DefaultMode: ptr.To[int32](0o400),
		}}},
		{Name: VolumeMungeSocket, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
}

// VolumeSourceVolume turns a named entry of spec.volumeSources into a pod volume called name.
func VolumeSourceVolume(sc *slurmv1alpha1.SlurmCluster, sourceName, name string) (corev1.Volume, error) {
	for _, v := range sc.Spec.VolumeSources {
		if v.Name != sourceName {
			continue
		}
		vol := corev1.Volume{Name: name, VolumeSource: v.Core()}
		switch {
		case v.HostPath != nil && systemPath(v.HostPath.Path):
			return vol, fmt.Errorf("volume source %q: hostPath %q is the node's root, one of its system directories or under one (/etc, /usr, /var/lib/kubelet, …); name a directory of its own", sourceName, v.HostPath.Path)
		case v.PersistentVolumeClaim == nil && v.NFS == nil && v.HostPath == nil && v.EmptyDir == nil && v.CSI == nil:
			return vol, fmt.Errorf("volume source %q sets no source", sourceName)
		}
		return vol, nil
	}
	return corev1.Volume{}, fmt.Errorf("volume source %q is not in spec.volumeSources", sourceName)
}

// systemTrees are node directories that hold what the node runs or trusts as root: its
// configuration (/etc/kubernetes, /etc/sudoers.d), binaries and libraries, devices and kernel
// interfaces, root's home, the runtimes' sockets and state, the kubelet's pods and the logs it
// follows, cron's spool, CNI plugins. Writing anywhere under one is root on the node, and reading
// under one leaks the node's credentials, so each is refused with its whole tree.
var systemTrees = []string{
	"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run",
	"/sbin", "/sys", "/usr",
	"/opt/cni", "/var/lib/cni", "/var/lib/containerd", "/var/lib/docker", "/var/lib/etcd",
	"/var/lib/kubelet", "/var/lib/rancher", "/var/lock", "/var/log", "/var/run", "/var/spool/cron",
}

// systemDirs are refused themselves but not below: their subdirectories are where node-local
// scratch and jails usually live (/var/lib/slurm-jail, /srv/jail, /tmp/x), while the directory
// itself holds the trees above or other users' files.
var systemDirs = []string{"/", "/home", "/opt", "/srv", "/tmp", "/var", "/var/lib"}

// systemPath says whether p is the node's root, a system directory, or under a system tree. The
// path is cleaned first, so "/var/lib/../lib/kubelet/x" and "/etc/" are seen as what the kubelet
// mounts. A symbolic link on the node is not seen here: the installer's allowed prefixes
// (package policy) are what keeps a SlurmCluster to directories made for it.
func systemPath(p string) bool {
	p = path.Clean("/" + p)
	for _, d := range systemTrees {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return slices.Contains(systemDirs, p)
}

// JailVolumes returns the jail volume and one volume per jail sub-mount, the container mounts
// of both, and the binds that place the sub-mounts inside the jail (slurm-jail-exec --bind).
// Nothing is mounted inside the jail volume by the kubelet, which would create mountpoint
// directories on the shared volume: sub-mounts are mounted beside it and bound in by the
// entrypoint, in the container's own mount namespace.
func JailVolumes(sc *slurmv1alpha1.SlurmCluster, jail slurmv1alpha1.JailVolume, subMounts []slurmv1alpha1.JailSubMount) ([]corev1.Volume, []corev1.VolumeMount, []JailBind, error) {
	jv, err := VolumeSourceVolume(sc, jail.VolumeSourceName, VolumeJail)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("jail: %w", err)
	}
	vols := []corev1.Volume{jv}
	// No mount propagation: it needs the host's mount to be shared or a slave, which nodes with a
	// private root mount refuse, and nothing is mounted under the jail from outside the pod.
	mounts := []corev1.VolumeMount{{Name: VolumeJail, MountPath: JailDir}}
	var binds []JailBind
	for _, m := range subMounts {
		name := slurmv1alpha1.SubMountVolumeName(m.Name)
		v, err := VolumeSourceVolume(sc, m.VolumeSourceName, name)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("jail sub-mount %q: %w", m.Name, err)
		}
		vols = append(vols, v)
		src := SubMountsDir + "/" + m.Name
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: src, ReadOnly: m.ReadOnly})
		binds = append(binds, JailBind{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	return vols, mounts, binds, nil
}

// DNSConfig adds search domains so that the pods of the cluster's headless Services resolve by
// their short names (demo-worker-3) from every pod, as Slurm's NodeAddr and SlurmctldHost need,
// and so do the Slurm node names (worker-3, login-1) that users ssh to.
func DNSConfig(sc *slurmv1alpha1.SlurmCluster, namespace, clusterDomain string) *corev1.PodDNSConfig {
	var searches []string
	for _, comp := range []slurmv1alpha1.Component{slurmv1alpha1.ComponentController, slurmv1alpha1.ComponentWorker, slurmv1alpha1.ComponentLogin} {
		searches = append(searches, strings.Join([]string{sc.HeadlessServiceName(comp), namespace, "svc", clusterDomain}, "."))
	}
	// The Slurm node names (worker-3, login-1): see package nodedns.
	searches = append(searches, strings.Join([]string{sc.NodeNamesServiceName(), namespace, "svc", clusterDomain}, "."))
	return &corev1.PodDNSConfig{Searches: searches}
}

// PodIndexEnv exposes the StatefulSet ordinal of the pod as POD_INDEX, and the Slurm node name
// (worker-3, login-0) as SLURM_NODE_NAME.
func PodIndexEnv(comp slurmv1alpha1.Component) []corev1.EnvVar {
	return NodeNameEnv(string(comp))
}

// NodeNameEnv is PodIndexEnv for Slurm node names <prefix>-N: a worker set's nodes.
func NodeNameEnv(prefix string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "POD_INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.labels['" + LabelPodIndex + "']",
		}}},
		{Name: "SLURM_NODE_NAME", Value: prefix + "-$(POD_INDEX)"},
	}
}

// HeadlessService gives each pod of a component a DNS name: <pod>.<service>.
func HeadlessService(sc *slurmv1alpha1.SlurmCluster, comp slurmv1alpha1.Component, ports []corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   TypeMeta("v1", "Service"),
		ObjectMeta: ObjectMeta(sc, sc.HeadlessServiceName(comp), comp),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 SelectorLabels(sc, comp),
			PublishNotReadyAddresses: true,
			Ports:                    ports,
		},
	}
}

// Service is a ClusterIP Service in front of a component's pods.
func Service(sc *slurmv1alpha1.SlurmCluster, comp slurmv1alpha1.Component, ports []corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   TypeMeta("v1", "Service"),
		ObjectMeta: ObjectMeta(sc, sc.ComponentName(comp), comp),
		Spec:       corev1.ServiceSpec{Selector: SelectorLabels(sc, comp), Ports: ports},
	}
}

// JWTKeyVolume is the JWT key Secret. It is mounted at JWTKeySecretDir and installed by
// InstallJWTKey, readable by slurmfacts.SlurmUser alone.
func JWTKeyVolume(sc *slurmv1alpha1.SlurmCluster) corev1.Volume {
	return corev1.Volume{Name: VolumeJWTKey, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: sc.JWTKeySecretName(), DefaultMode: ptr.To[int32](0o400),
	}}}
}

// WaitForJail is the init container of pods that use the jail (login, worker, controller): it
// waits until the populate Job has marked the jail complete, so no daemon starts in a
// half-copied jail. The image is one with the jail entrypoint (the worker's or the login's).
func WaitForJail(sc *slurmv1alpha1.SlurmCluster, image string) corev1.Container {
	return Container(sc, corev1.Container{
		Name:         "wait-for-jail",
		Image:        image,
		Command:      []string{slurmfacts.JailEntrypoint, "--wait-populated"},
		VolumeMounts: []corev1.VolumeMount{{Name: VolumeJail, MountPath: JailDir, ReadOnly: true}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		}},
	})
}

// TCPProbe succeeds when the named container port accepts connections, checked every
// periodSeconds.
func TCPProbe(port string, periodSeconds int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(port)}},
		PeriodSeconds: periodSeconds,
	}
}

// NodeFilter is the spec's k8sNodeFilter with this name, or nil.
func NodeFilter(sc *slurmv1alpha1.SlurmCluster, name string) *slurmv1alpha1.K8sNodeFilter {
	for i := range sc.Spec.K8sNodeFilters {
		if sc.Spec.K8sNodeFilters[i].Name == name {
			return &sc.Spec.K8sNodeFilters[i]
		}
	}
	return nil
}

// SpoolVolume is a daemon's spool: a volume from spec.volumeSources, or one claim per pod from
// the spool's template; when the spool is unset, defaultClaim (one claim per pod) or, without
// one, an emptyDir. It returns the pod volume or the claim, never both.
func SpoolVolume(sc *slurmv1alpha1.SlurmCluster, sp *slurmv1alpha1.SpoolVolume, defaultClaim *corev1.PersistentVolumeClaimSpec) (*corev1.Volume, *corev1.PersistentVolumeClaimSpec, error) {
	switch {
	case sp != nil && sp.VolumeSourceName != "":
		v, err := VolumeSourceVolume(sc, sp.VolumeSourceName, VolumeSpool)
		if err != nil {
			return nil, nil, fmt.Errorf("spool: %w", err)
		}
		return &v, nil, nil
	case sp != nil && sp.VolumeClaimTemplateSpec != nil:
		return nil, sp.VolumeClaimTemplateSpec.DeepCopy(), nil
	case defaultClaim != nil:
		return nil, defaultClaim, nil
	}
	return &corev1.Volume{Name: VolumeSpool, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, nil, nil
}
