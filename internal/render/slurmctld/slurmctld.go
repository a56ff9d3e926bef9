// Package slurmctld renders slurmctld: a StatefulSet (one pod, or two with a backup
// slurmctld) and its headless Service.
package slurmctld

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

const comp = slurmv1alpha1.ComponentController

// DefaultSpoolSize is the size of the spool claim when spec.slurmNodes.controller.volumes.spool
// is unset.
var DefaultSpoolSize = resource.MustParse("10Gi")

// Service is the headless Service that names slurmctld's pods, and carries slurmrestd.
func Service(in base.Input) *corev1.Service {
	return base.HeadlessService(in.Cluster, comp, []corev1.ServicePort{
		{Name: "slurmctld", Port: slurmfacts.SlurmctldPort, TargetPort: intstr.FromString("slurmctld")},
		{Name: "slurmrestd", Port: slurmfacts.SlurmrestdPort, TargetPort: intstr.FromString("slurmrestd")},
	})
}

// ReconfigureScript runs beside slurmctld. The kubelet updates the mounted Slurm config some
// time after the ConfigMap changes (at once when the operator nudges the pod); when the files
// change, the script runs `scontrol reconfigure` once, so slurmctld and every slurmd pick them
// up without a restart (they keep their PIDs and running jobs; workers fetch the new files from
// slurmctld). slurmctld drops a node whose NodeAddr does not resolve, so the script first waits,
// up to a minute, for every node's address to resolve (a new worker pod's name exists once the
// pod has an address); a reconfigure made without some is made again once they resolve. A
// failed reconfigure is retried on the next look.
const ReconfigureScript = `unresolved() {
  sed -n '/State=CLOUD/!s/.*NodeAddr=\([^ ]*\).*/\1/p' /etc/slurm/*.conf | while read -r addrs; do
    for a in $(scontrol show hostnames "$addrs"); do getent hosts "$a" >/dev/null || echo "$a"; done
  done
}
last=""
pending=""
waited=0
while true; do
  cur=$(cat /etc/slurm/*.conf 2>/dev/null | md5sum)
  if [ -z "$last" ]; then
    last=$cur
    echo "watching /etc/slurm for changes"
  elif [ "$cur" != "$last" ] || [ -n "$pending" ]; then
    missing=$(unresolved)
    if [ -n "$missing" ] && [ "$cur" != "$last" ] && [ $waited -lt 60 ]; then
      [ $waited = 0 ] && echo "waiting for node addresses to resolve:" $missing
      waited=$((waited + 1))
    elif [ "$cur" = "$last" ] && [ -n "$missing" ]; then
      : # reconfigured already; waiting for the rest of the addresses
    elif scontrol reconfigure; then
      echo "slurm config changed: reconfigured" ${missing:+"(unresolved: $(echo $missing))"}
      last=$cur
      pending=$missing
      waited=0
    fi
  fi
  sleep 1
done
`

// EmptyNodeGresConf gives slurmctld its slurmfacts.NodeGresConf: gres.conf includes each
// worker's own file there, and slurmctld reads gres.conf's includes too (to serve configless
// nodes), waiting a minute for a missing one at every start and reconfigure. slurmctld's is a
// link to the config's slurmconf.ControllerGresConf (the elastic sets' GPUs, followed at each
// reconfigure) where the config has one, and empty otherwise.
const EmptyNodeGresConf = "mkdir -p " + slurmfacts.RunDir + " && if [ -e " + slurmfacts.ConfDir + "/" + slurmconf.ControllerGresConf + " ]; then ln -sf " +
	slurmfacts.ConfDir + "/" + slurmconf.ControllerGresConf + " " + slurmfacts.NodeGresConf + "; else [ -e " + slurmfacts.NodeGresConf + " ] || : > " + slurmfacts.NodeGresConf + "; fi"

// UseJailUsers makes the container's passwd and group the jail's (links, so users added later
// are seen at once). The images and the jail give slurm and munge the same ids. A jail that
// holds no passwd (not populated, and not managed by the operator) leaves the image's own.
const UseJailUsers = "if [ -s " + base.JailDir + "/etc/passwd ]; then ln -sf " + base.JailDir + "/etc/passwd /etc/passwd && ln -sf " +
	base.JailDir + "/etc/group /etc/group; fi"

// RestdArgs are slurmrestd's arguments: JWT authentication, the slurmctld endpoints, and the
// slurmdbd ones when the cluster has accounting (they fail to load without it; the exporter asks
// them whether slurmdbd answers), listening on slurmfacts.SlurmrestdPort.
func RestdArgs(sc *slurmv1alpha1.SlurmCluster) []string {
	plugins := "openapi/slurmctld"
	if sc.Spec.SlurmNodes.Accounting.Enabled {
		plugins += ",openapi/slurmdbd"
	}
	return []string{"-a", "rest_auth/jwt", "-s", plugins, fmt.Sprintf("0.0.0.0:%d", slurmfacts.SlurmrestdPort)}
}

// RestdEnv is slurmrestd's environment. slurmrestd refuses to run as root; SLURM_JWT=daemon
// makes it pass the clients' tokens on. It unshares its System V IPC and file table at start,
// which the runtime's default seccomp profile refuses an unprivileged process: its container is
// that isolation. Two malloc arenas: with glibc's default (8 per CPU) each large answer (10,000
// jobs is about 90 MB of JSON) left its arena's memory behind, and slurmrestd grew by about a
// GiB per request (11 GiB after 11 job lists, 2.9 GiB with two arenas; make bench-exporter).
func RestdEnv() []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "SLURM_JWT", Value: "daemon"},
		{Name: "SLURMRESTD_SECURITY", Value: "disable_unshare_sysv,disable_unshare_files"},
		{Name: "MALLOC_ARENA_MAX", Value: "2"},
	}
}

// RestdResources are the slurmrestd container's requests and memory limit for a cluster of
// workers workers. slurmrestd holds a whole answer in memory while it writes its JSON, so its
// memory follows the job list, and the job list follows the cluster's size: make bench-exporter
// measured a peak of 2.9 GiB (2,865 MiB) at 1,000 nodes and 10,000 jobs, 2.9 MiB per worker at
// 10 jobs per worker (docs/performance.md). With MALLOC_ARENA_MAX=2 (RestdEnv) it keeps about
// one list's peak after it, so that peak is its steady state once the operator or the exporter
// has listed jobs. With n the worker count rounded up to a power of 2, at least 16 (16, 32, 64,
// …, 1,024, …):
//
//	memory request = 128 MiB + 3 MiB × n    the measured peak per worker, rounded up, and a floor
//	memory limit   = 1 GiB + 6 MiB × n      room for twice that many jobs, and 3,500 more
//	CPU request    = 100m + 0.5m × n        a 10,000-job list took 4.6 s of CPU at 1,000
//	                                        workers, asked at most every 10 s per exporter
//
// The limit is what keeps slurmctld alive: slurmrestd is a container of its own in slurmctld's
// pod, and its own memory limit means a job list past it (a user asking for every job of a
// huge queue) gets slurmrestd OOM-killed and restarted by the kubelet, while slurmctld's
// memory is untouched; without it the node's OOM killer could pick slurmctld. No CPU limit:
// throttling would only stretch a long list past its clients' timeouts, and slurmctld's CPU is
// kept by its own request. The rounding keeps the worker count out of the pod template while
// the cluster scales within a step (8 to 16 workers restarts nothing; docs/reconcile.md): a
// cluster that doubles past a step changes the template, and its controller pod restarts once
// (slurmctld resumes from its saved state; running jobs go on).
//
// spec.slurmNodes.controller.resources sets the slurmctld container's resources only; the spec
// has no setting for slurmrestd's, so a cluster whose queue is far longer than 10 jobs per
// worker cannot raise them: a job list past the limit fails (the exporter's job metrics, and
// the operator's look at busy workers, which then fails closed and removes no worker).
func RestdResources(workers int32) corev1.ResourceRequirements {
	n := int64(restdStepMin)
	for n < int64(workers) {
		n *= 2
	}
	const mib = 1 << 20
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(100+n/2, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity((128+3*n)*mib, resource.BinarySI),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: *resource.NewQuantity((1024+6*n)*mib, resource.BinarySI),
		},
	}
}

// restdStepMin is the smallest worker count RestdResources sizes slurmrestd for.
const restdStepMin = 16

// RestdURL is where the operator reaches slurmrestd.
func RestdURL(sc *slurmv1alpha1.SlurmCluster, clusterDomain string) string {
	return fmt.Sprintf("http://%s.%s.svc.%s:%d", sc.HeadlessServiceName(comp), sc.Namespace, clusterDomain, slurmfacts.SlurmrestdPort)
}

// StatefulSet runs slurmctld with a munge sidecar; its spool holds StateSaveLocation.
func StatefulSet(in base.Input) (*appsv1.StatefulSet, error) {
	sc := in.Cluster
	spec := sc.Spec.SlurmNodes.Controller
	volumes := append(base.CommonVolumes(sc), base.JWTKeyVolume(sc))
	mounts := []corev1.VolumeMount{
		{Name: base.VolumeSlurmConfig, MountPath: slurmfacts.ConfDir, ReadOnly: true},
		{Name: base.VolumeMungeSocket, MountPath: slurmfacts.MungeSocketDir},
		{Name: base.VolumeJWTKey, MountPath: base.JWTKeySecretDir, ReadOnly: true},
		{Name: base.VolumeSpool, MountPath: slurmfacts.StateSaveLocation},
	}
	// Without a spool in the spec, each controller pod claims DefaultSpoolSize: the state
	// outlives the pod.
	spoolVol, spoolClaim, err := base.SpoolVolume(sc, spec.Volumes.Spool, &corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: DefaultSpoolSize}},
	})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	if spoolVol != nil {
		volumes = append(volumes, *spoolVol)
	}
	// slurmctld looks up the users of jobs (their groups go into job credentials), and users are
	// made in the jail (adduser on a login node): it reads the jail's passwd and group, read-only.
	jailSpec := sc.Spec.SlurmNodes.Worker.Volumes.Jail
	if j := spec.Volumes.Jail; j != nil {
		jailSpec = *j
	}
	jv, jm, _, err := base.JailVolumes(sc, jailSpec, nil)
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	volumes = append(volumes, jv...)
	for _, m := range jm {
		m.ReadOnly = true
		mounts = append(mounts, m)
	}
	// With a directory (spec.identity), SSSD resolves the users the jail does not have.
	volumes = append(volumes, base.IdentityVolumes(sc)...)
	mounts = append(mounts, base.ControllerIdentityMounts(sc)...)
	var inits []corev1.Container
	if pj := sc.Spec.PopulateJail; pj != nil && pj.Image != "" {
		// The jail's users are read from it: wait until it is populated.
		inits = append(inits, base.WaitForJail(sc, sc.Spec.Images.Worker))
	}
	pod := corev1.PodSpec{
		// SSSD runs from the worker image: the controller image carries only its NSS module.
		InitContainers: base.WithSSSDSidecar(sc, sc.Spec.Images.Worker, append(inits, base.MungeSidecar(sc, slurmfacts.MungeSocketDir))),
		Containers: []corev1.Container{base.Container(sc, corev1.Container{
			Name:  "slurmctld",
			Image: sc.Spec.Images.Controller,
			// slurmctld starts as root, reads the key, and runs as SlurmUser.
			// The spool is the slurm user's, whatever the volume made it (hostPath and NFS
			// volumes ignore fsGroup).
			Command: []string{"/bin/sh", "-c", base.Script(
				base.InstallJWTKey(),
				base.InstallDir(slurmfacts.StateSaveLocation, slurmfacts.SlurmUser, "0750"),
				UseJailUsers,
				EmptyNodeGresConf,
				// Never -i: with it, slurmctld carries on past a state file it cannot read
				// and drops every job the file held. Without it, it stops with a fatal line
				// that the pod's status keeps (FallbackToLogsOnError) and the operator reports.
				"exec slurmctld -D",
			)},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			Ports:                    []corev1.ContainerPort{{Name: "slurmctld", ContainerPort: slurmfacts.SlurmctldPort}},
			Resources:                spec.Resources.Core(),
			VolumeMounts:             mounts,
			ReadinessProbe:           base.TCPProbe("slurmctld", 5),
			// Restarted when it stops answering for a minute.
			LivenessProbe: withFailureThreshold(base.TCPProbe("slurmctld", 10), 6),
		})},
		Volumes:                       volumes,
		DNSConfig:                     base.DNSConfig(sc, sc.Namespace, in.ClusterDomain),
		TerminationGracePeriodSeconds: ptr.To[int64](60),
		// No fsGroup: it would give every container the slurm group, which slurmrestd refuses
		// ("should not be run with SlurmUser's group"). The command above makes the spool and
		// the JWT key the slurm user's.
	}
	pod.Containers = append(pod.Containers, base.Container(sc, corev1.Container{
		Name:    "reconfigure",
		Image:   sc.Spec.Images.Controller,
		Command: []string{"/bin/sh", "-c", ReconfigureScript},
		VolumeMounts: []corev1.VolumeMount{
			{Name: base.VolumeSlurmConfig, MountPath: slurmfacts.ConfDir, ReadOnly: true},
			{Name: base.VolumeMungeSocket, MountPath: slurmfacts.MungeSocketDir},
		},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		}},
	}), base.Container(sc, corev1.Container{
		Name:    "slurmrestd",
		Image:   sc.Spec.Images.Controller,
		Command: []string{"slurmrestd"},
		Args:    RestdArgs(sc),
		Env:     RestdEnv(),
		Ports:   []corev1.ContainerPort{{Name: "slurmrestd", ContainerPort: slurmfacts.SlurmrestdPort}},
		VolumeMounts: []corev1.VolumeMount{
			{Name: base.VolumeSlurmConfig, MountPath: slurmfacts.ConfDir, ReadOnly: true},
		},
		Resources:       RestdResources(in.TotalWorkers()),
		SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To(slurmfacts.NobodyUID), RunAsGroup: ptr.To(slurmfacts.NobodyUID), RunAsNonRoot: ptr.To(true)},
		ReadinessProbe:  base.TCPProbe("slurmrestd", 5),
	}))
	base.Scheduling(sc, spec.K8sNodeFilterName, &pod)
	base.SpreadAcrossNodes(sc, comp, &pod)
	pod.PriorityClassName = in.ControlPlanePriorityClass
	return base.StatefulSet(sc, base.StatefulSetParams{
		Component: comp, Replicas: spec.Size, Pod: pod, SpoolClaim: spoolClaim,
		PodAnnotations: base.WithSSSDConfigHash(in, nil), Annotations: base.SSSDSecretAnnotations(in),
	}), nil
}

func withFailureThreshold(p *corev1.Probe, n int32) *corev1.Probe {
	p.FailureThreshold = n
	return p
}
