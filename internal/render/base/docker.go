package base

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
)

// Docker on worker and login nodes (docs/containers.md): a dockerd container per pod, run in the
// jail so that paths given to `docker run -v` are the jail's, its data on an emptyDir of the
// node (overlay storage does not work on network file systems, and nodes must not share a
// daemon's state), its socket, exec root and pid file on a second emptyDir that every
// container of the pod mounts at /run/docker (the jail's /run is the container's).
const (
	VolumeDockerData = "docker-data"
	VolumeDockerRun  = "docker-run"
	// DockerRunDir holds dockerd's socket (docker.sock) in every container of the pod.
	DockerRunDir = "/run/docker"
	// dockerDataDir is where the dockerd container mounts its data, bound on /var/lib/docker
	// in the jail.
	dockerDataDir = PodFilesDir + "/docker"
)

// DockerSocketLink makes /run/docker.sock, where the docker CLI looks by default, point at
// the pod's dockerd; containers of a cluster with Docker run it before their program.
const DockerSocketLink = "if [ -d " + DockerRunDir + " ]; then ln -sfn docker/docker.sock /run/docker.sock; fi"

// WithDockerSocket wraps argv so that, with Docker on, it starts after DockerSocketLink.
func WithDockerSocket(sc *slurmv1alpha1.SlurmCluster, argv []string) []string {
	if !sc.DockerEnabled() {
		return argv
	}
	return append([]string{"/bin/sh", "-c", DockerSocketLink + `; exec "$@"`, argv[0]}, argv...)
}

// DockerVolumes are the pod's Docker volumes (none when Docker is off).
func DockerVolumes(sc *slurmv1alpha1.SlurmCluster) []corev1.Volume {
	if !sc.DockerEnabled() {
		return nil
	}
	return []corev1.Volume{
		{Name: VolumeDockerData, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: sc.Spec.Docker.DataSizeLimit}}},
		{Name: VolumeDockerRun, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
}

// DockerRunMounts are what the pod's other containers mount to reach dockerd (none when Docker
// is off).
func DockerRunMounts(sc *slurmv1alpha1.SlurmCluster) []corev1.VolumeMount {
	if !sc.DockerEnabled() {
		return nil
	}
	return []corev1.VolumeMount{{Name: VolumeDockerRun, MountPath: DockerRunDir}}
}

// DockerdScript runs dockerd from the jail and starts it again if it stops, so a node where
// Docker cannot run (a jail populated before Docker was in it, a kernel without overlay) keeps
// its Slurm daemons and says why in this container's log. Containers get no bridge network
// (the node's network is theirs with --network host), and dockerd writes no iptables rules.
const DockerdScript = `set -u
if ! command -v dockerd >/dev/null; then
  echo "no dockerd in the jail: Docker is off on this node (a jail populated before it had Docker; install docker.io in the shared root)" >&2
  exec sleep infinity
fi
while :; do
  dockerd --host=unix://` + DockerRunDir + `/docker.sock --exec-root=` + DockerRunDir + `/exec --pidfile=` + DockerRunDir + `/dockerd.pid \
    --data-root=/var/lib/docker --group=docker --iptables=false --ip6tables=false --bridge=none "$@"
  echo "dockerd exited ($?); starting it again in 10 s" >&2
  sleep 10
done`

// DockerdContainer runs dockerd (privileged: it makes mounts, cgroups and namespaces for its
// containers) from image, which has the jail entrypoint. It mounts and binds what the node's
// Slurm containers do (mounts, binds: the jail, its sub-mounts, /tmp, /dev/shm), so that a
// path a job gives to docker run -v is the same file for dockerd.
func DockerdContainer(sc *slurmv1alpha1.SlurmCluster, image string, mounts []corev1.VolumeMount, binds []JailBind) corev1.Container {
	args := []string{"/bin/sh", "-c", DockerdScript, "dockerd"}
	for _, m := range sc.Spec.Docker.RegistryMirrors {
		args = append(args, "--registry-mirror="+strings.TrimSpace(m))
	}
	binds = append(append([]JailBind{}, binds...), JailBind{Source: dockerDataDir, Target: "/var/lib/docker"})
	return Container(sc, corev1.Container{
		Name:  "dockerd",
		Image: image,
		// In a mount namespace whose root is the jail: runc's pivot_root for each container,
		// and rootless containers' user namespaces, need a real root, not a chroot.
		Command: JailExecPivot(binds, args...),
		VolumeMounts: append(append([]corev1.VolumeMount{}, mounts...),
			corev1.VolumeMount{Name: VolumeDockerData, MountPath: dockerDataDir},
			corev1.VolumeMount{Name: VolumeDockerRun, MountPath: DockerRunDir},
		),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		}},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
	})
}
