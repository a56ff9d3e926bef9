// Package worker renders the slurmd nodes: a StatefulSet of worker-0 … worker-(size-1), each
// running slurmd and sshd in the jail, and the headless Service that names them.
package worker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmconf"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

const comp = slurmv1alpha1.ComponentWorker

// Service is the headless Service that gives each worker pod a DNS name.
func Service(in base.Input) *corev1.Service {
	return base.HeadlessService(in.Cluster, comp, []corev1.ServicePort{
		{Name: "slurmd", Port: slurmfacts.SlurmdPort, TargetPort: intstr.FromString("slurmd")},
		{Name: "ssh", Port: 22, TargetPort: intstr.FromString("ssh")},
	})
}

// StatefulSets are the StatefulSets of every worker set: spec.slurmNodes.worker's, then each
// node set's.
func StatefulSets(in base.Input) ([]*appsv1.StatefulSet, error) {
	var out []*appsv1.StatefulSet
	for _, set := range in.WorkerSets() {
		sts, err := StatefulSet(in, set)
		if err != nil {
			return nil, err
		}
		out = append(out, sts)
	}
	return out, nil
}

// StatefulSet runs slurmd in the jail on each worker of a set. Its pod template depends only on
// inputs that need a restart: the worker count and the Slurm config are not part of it.
func StatefulSet(in base.Input, set slurmv1alpha1.WorkerSet) (*appsv1.StatefulSet, error) {
	sc := in.Cluster
	spec := set.Worker
	gpu := in.GPUOf(set.Name)
	jailVols, jailMounts, subBinds, err := base.JailVolumes(sc, spec.Volumes.Jail, spec.Volumes.JailSubMounts)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	volumes := append(base.CommonVolumes(sc), jailVols...)
	volumes = append(volumes,
		base.SSHHostKeysVolume(sc),
		base.AuthorizedKeysVolume(sc),
		// /dev/shm for jobs: memory-backed, sized by the spec (the runtime's is 64 MiB).
		corev1.Volume{Name: volumeShm, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: spec.SharedMemorySize,
		}}},
		// One /tmp for slurmd's jobs and ssh sessions on the node.
		corev1.Volume{Name: volumeTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	)
	volumes = append(volumes, base.DockerVolumes(sc)...)
	volumes = append(volumes, base.IdentityVolumes(sc)...)
	// Without a spool in the spec, slurmd's state is the pod's: an emptyDir.
	spoolVol, spoolClaim, err := base.SpoolVolume(sc, spec.Volumes.Spool, nil)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	if spoolVol != nil {
		volumes = append(volumes, *spoolVol)
	}

	resources := spec.Resources.Core()
	for name, n := range gpuRequests(gpu) {
		if resources.Limits == nil {
			resources.Limits = corev1.ResourceList{}
		}
		if resources.Requests == nil {
			resources.Requests = corev1.ResourceList{}
		}
		q := resource.MustParse(strconv.Itoa(int(n)))
		resources.Limits[name] = q
		resources.Requests[name] = q
	}
	// What both containers see of the pod, and bind into the jail.
	nodeMounts := append(append([]corev1.VolumeMount{}, jailMounts...),
		corev1.VolumeMount{Name: base.VolumeSlurmConfig, MountPath: base.ConfigMountDir, ReadOnly: true},
		corev1.VolumeMount{Name: base.VolumeMungeSocket, MountPath: slurmfacts.MungeSocketDir},
		corev1.VolumeMount{Name: volumeShm, MountPath: "/dev/shm"},
		corev1.VolumeMount{Name: volumeTmp, MountPath: "/tmp"},
	)
	// Clipped: each container appends its own mounts to a copy, never into a shared array.
	nodeMounts = slices.Clip(nodeMounts)
	binds := slices.Clip(append([]base.JailBind{{Source: base.ConfigMountDir, Target: slurmfacts.ConfDir, ReadOnly: true}}, subBinds...))
	// sshd runs in slurmd's container (SSHDScript): its binds are slurmd's.
	slurmdBinds := append(append([]base.JailBind{}, binds...),
		base.JailBind{Source: spoolMountDir, Target: slurmfacts.SlurmdSpoolDir},
		base.SSHHostKeysBind, base.AuthorizedKeysBind,
		base.JailBind{Source: PAMFile(sc), Target: "/etc/pam.d/sshd", ReadOnly: true},
	)
	slurmdBinds = append(slurmdBinds, base.IdentityBinds(sc, false)...)

	env := base.NodeNameEnv(set.Name)
	script := WorkerScript
	if set.Worker.Elastic() {
		script = ElasticWorkerScript
	}
	slurmd := base.Container(sc, corev1.Container{
		Name:  "slurmd",
		Image: set.Image,
		Command: base.WithEntrypointFlags(base.JailExecPivot(slurmdBinds, base.WithDockerSocket(sc,
			append([]string{"/bin/sh", "-c", script, "worker"}, base.SSHDArgsWithIdentity(sc, 22)...))...),
			append(slurmconf.WorkerGPUFlags(in, set), base.IdentityEntrypointFlags(sc)...)...),
		Env: append(env,
			corev1.EnvVar{Name: "SLURM_CONF_SERVER", Value: ConfServer(sc)},
			corev1.EnvVar{Name: "SSHD_SCRIPT", Value: SSHDScript},
			corev1.EnvVar{Name: "SSH_ADMIN_GROUPS", Value: strings.Join(spec.SSH.AdminGroups, " ")},
		),
		Ports: []corev1.ContainerPort{
			{Name: "slurmd", ContainerPort: slurmfacts.SlurmdPort},
			{Name: "ssh", ContainerPort: 22},
		},
		Resources: resources,
		VolumeMounts: append(append(nodeMounts,
			corev1.VolumeMount{Name: base.VolumeSpool, MountPath: spoolMountDir},
			base.SSHHostKeysMount, base.AuthorizedKeysMount,
		), append(base.DockerRunMounts(sc), base.IdentityMounts(sc)...)...),
		// slurmd makes cgroups for jobs and the entrypoint mounts into the jail: nothing
		// narrower than a privileged container allows both (docs/images.md). sshd runs here
		// too, with a bounded capability set (SSHDScript), so that slurmstepd can move a
		// session into its job's cgroup: the kernel lets it move a process only within its
		// own cgroup namespace, which is this container's.
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		// Ready when slurmctld hears from this node.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: base.JailExec(nil, "/bin/sh", "-c", ReadyScript),
			}},
			PeriodSeconds:  10,
			TimeoutSeconds: 8,
		},
		// Started once slurmctld has heard from this node, and for the rest of the container's
		// run: until then the node cannot have run a job, so a scale-down need not wait for it
		// (the operator reads the started flag). The threshold only bounds how long a slurmd
		// that never registers is left before the kubelet restarts it: a day.
		StartupProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
				Command: base.JailExec(nil, "/bin/sh", "-c", ReadyScript),
			}},
			PeriodSeconds:    2,
			TimeoutSeconds:   8,
			FailureThreshold: 43200,
		},
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: base.JailExec(nil, "/bin/sh", "-c", PreStopScript),
		}}},
	})
	containers := []corev1.Container{slurmd}
	if sc.DockerEnabled() {
		containers = append(containers, base.DockerdContainer(sc, set.Image, nodeMounts, binds))
	}
	pod := corev1.PodSpec{
		InitContainers: base.WithSSSDSidecar(sc, set.Image,
			[]corev1.Container{nodeDirs(sc, jailMounts[0]), base.WaitForJail(sc, set.Image), base.MungeSidecar(sc, slurmfacts.MungeSocketDir)}),
		Containers:                    containers,
		Volumes:                       volumes,
		DNSConfig:                     base.DNSConfig(sc, sc.Namespace, in.ClusterDomain),
		TerminationGracePeriodSeconds: ptr.To[int64](TerminationGracePeriodSeconds),
	}
	base.Scheduling(sc, spec.K8sNodeFilterName, &pod)
	requireNodeLabels(&pod, gpu.RequireLabels)
	p := base.StatefulSetParams{
		Component: comp, Replicas: in.PodCountOf(set), Pod: pod, SpoolClaim: spoolClaim, OnDelete: true,
		PodAnnotations: base.WithSSSDConfigHash(in, maps.Clone(spec.PodAnnotations)),
	}
	if !set.Default() {
		// A node set's pods carry its name, in their selector too: the sets' StatefulSets never
		// claim each other's pods. Its spec is kept on the StatefulSet for when the set leaves
		// the spec while its nodes still drain.
		p.Name = sc.WorkerSetStatefulSetName(set.Name)
		p.SetLabels = map[string]string{slurmv1alpha1.LabelNodeSet: set.Name}
		if ns, ok := nodeSetSpec(sc, set.Name); ok {
			p.Annotations = map[string]string{slurmv1alpha1.AnnotationNodeSet: slurmv1alpha1.NodeSetSpecJSON(ns)}
		}
	}
	return base.StatefulSet(sc, p), nil
}

// nodeSetSpec is the named entry of spec.slurmNodes.nodeSets.
func nodeSetSpec(sc *slurmv1alpha1.SlurmCluster, name string) (slurmv1alpha1.NodeSet, bool) {
	for _, ns := range sc.Spec.SlurmNodes.NodeSets {
		if ns.Name == name {
			return ns, true
		}
	}
	return slurmv1alpha1.NodeSet{}, false
}

const (
	volumeShm = "shm"
	volumeTmp = "tmp"
	// spoolMountDir is where slurmd's container mounts its spool, bound into the jail.
	spoolMountDir = base.PodFilesDir + "/spool"
)

// NodeDirsScript gives the pod's shared directories the modes of a real node's: the kubelet
// makes an emptyDir 0777 without the sticky bit, so on the node's one /tmp (every job and ssh
// session of the node shares it) any user could delete or replace another's files, or make
// a directory another user's program will trust. /tmp gets 1777, as on any Linux host;
// dockerd's directory (socket, exec root) 0755, owned by root, its daemon.
//
// It also adds the exporter's read-only Slurm user to a jail populated before the images had
// it (slurmctld reads the jail's passwd to resolve the exporter's token): one line in
// /etc/passwd and one in /etc/group, under a lock, only when neither the name nor its id is
// taken; nothing else in the jail changes.
var NodeDirsScript = `chmod 1777 /tmp
if [ -d ` + base.DockerRunDir + ` ]; then chown 0:0 ` + base.DockerRunDir + ` && chmod 0755 ` + base.DockerRunDir + `; fi
` + MetricsUserScript

// MetricsUserScript adds slurmfacts.MetricsUser to the populated jail at $JAIL (default
// base.JailDir) when it lacks the user. It never fails the pod: a jail root may not write
// (an NFS export with root_squash) is said in the log and left as it is.
var MetricsUserScript = fmt.Sprintf(`J=${JAIL:-%[1]s}
if [ -f "$J/%[2]s" ] && [ -f "$J/etc/passwd" ] && [ -f "$J/etc/group" ] && ! grep -q '^%[3]s:' "$J/etc/passwd"; then (
	exec 9>>"$J/etc/passwd" || exit 1
	flock 9
	if grep -q '^%[3]s:' "$J/etc/passwd"; then
		:
	elif cut -d: -f3 "$J/etc/passwd" | grep -qx %[4]d || { ! grep -q '^%[3]s:' "$J/etc/group" && cut -d: -f3 "$J/etc/group" | grep -qx %[4]d; }; then
		echo "node-dirs: id %[4]d is taken in the jail, so the exporter's user %[3]s cannot be added: add it with another id (docs/observability.md)" >&2
	else
		grep -q '^%[3]s:' "$J/etc/group" || echo '%[3]s:x:%[4]d:' >>"$J/etc/group"
		echo '%[3]s:x:%[4]d:%[4]d:Slurm metrics (read-only):/nonexistent:/usr/sbin/nologin' >>"$J/etc/passwd"
		echo "node-dirs: added the exporter's user %[3]s to the jail" >&2
	fi
) || echo "node-dirs: the jail's /etc/passwd is not writable here (root_squash?), so the exporter's user %[3]s is not added: add it on a login node (docs/observability.md)" >&2
fi
`, base.JailDir, slurmfacts.JailMarkerFile, slurmfacts.MetricsUser, slurmfacts.MetricsUID)

// nodeDirs runs NodeDirsScript before anything else of the pod starts.
func nodeDirs(sc *slurmv1alpha1.SlurmCluster, jail corev1.VolumeMount) corev1.Container {
	return base.Container(sc, corev1.Container{
		Name:         "node-dirs",
		Image:        sc.Spec.Images.Worker,
		Command:      []string{"/bin/sh", "-c", NodeDirsScript},
		VolumeMounts: append([]corev1.VolumeMount{{Name: volumeTmp, MountPath: "/tmp"}, jail}, base.DockerRunMounts(sc)...),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
		}},
	})
}

// TerminationGracePeriodSeconds bounds how long a stopping worker waits for its jobs (PreStopScript).
const TerminationGracePeriodSeconds = 300

// ConfServer is slurmd's --conf-server: every slurmctld, in order. Workers take their config
// from slurmctld (configless), not from their mounted copy, which the kubelet updates up to a
// minute late: a new node list reaches every slurmd with the reconfigure that brings it.
func ConfServer(sc *slurmv1alpha1.SlurmCluster) string {
	var hosts []string
	for i := int32(0); i < sc.Spec.SlurmNodes.Controller.Size; i++ {
		hosts = append(hosts, fmt.Sprintf("%s:%d", sc.PodName(slurmv1alpha1.ComponentController, i), slurmfacts.SlurmctldPort))
	}
	return strings.Join(hosts, ",")
}

// SlurmdScript starts slurmd as this pod's Slurm node, with its config from slurmctld
// ($SLURM_CONF_SERVER). A new worker waits until slurmctld lists its node (the reconfigure that
// adds it may come a moment after the pod), rather than failing and backing off. A drain this
// pod's preStop set (and only that one: an admin's or another part of the operator's reason
// stays) is lifted first, so a restarted worker takes jobs again.
const SlurmdScript = `node=$SLURM_NODE_NAME
# Jobs get slurmd's locked-memory limit (PropagateResourceLimitsExcept=MEMLOCK): RDMA needs it.
ulimit -l unlimited 2>/dev/null || echo "cannot raise the locked-memory limit: RDMA in jobs will be limited to $(ulimit -l) KiB" >&2
waited=0
until line=$(scontrol show node "$node" -o 2>/dev/null) && [ -n "$line" ]; do
  [ $waited = 0 ] && echo "waiting for slurmctld to list node $node"
  waited=1
  sleep 1
done
if printf '%s\n' "$line" | grep -qF 'Reason=` + slurmfacts.DrainPodStopping + ` ['; then
  scontrol update nodename="$node" state=resume && echo "lifted the drain this pod set when it stopped"
fi
` + slurmdExec + `
`

const slurmdExec = `exec slurmd -D -N "$node" --conf-server "$SLURM_CONF_SERVER"`

// ElasticSlurmdScript is SlurmdScript for an elastic set's node: slurmd reports its node booted
// when slurmd started (slurmd -b). A pod shares its host's kernel, whose uptime is the
// Kubernetes node's: slurmctld ignores a powering-up node whose reported boot is older than the
// power-up request, so without it no node Slurm powers up would ever register. slurmd keeps
// the time across its re-execs (SLURMD_BOOT_TIME). Fixed sets keep SlurmdScript, and their
// pods' template, as they were.
var ElasticSlurmdScript = strings.Replace(SlurmdScript, slurmdExec, slurmdExec+" -b", 1)

// PAMDir is where the worker image keeps its PAM files for sshd (images/worker/pam).
const PAMDir = "/opt/slurm-operator/pam"

// PAMFile is the worker image's PAM file that the jail entrypoint binds over the jail's
// /etc/pam.d/sshd: pam_slurm_adopt refusing users without a job on the worker (the default), or
// letting everyone in (ssh.requireJob false). Sessions of users with a job there join it either
// way; root and ssh.adminGroups are let in outside any job.
func PAMFile(sc *slurmv1alpha1.SlurmCluster) string {
	if sc.Spec.SlurmNodes.Worker.SSHRequiresJob() {
		return PAMDir + "/sshd"
	}
	return PAMDir + "/sshd-open"
}

// AdminGroupsFile is where SSHDScript writes ssh.adminGroups for the PAM files' pam_listfile:
// under /run, the container's own, not the shared jail's.
const AdminGroupsFile = "/run/slurm-operator/ssh-admin-groups"

// SSHDCapabilities bound what sshd and every ssh session on a worker may ever hold, root's
// included: the container runtime's default set, and AUDIT_CONTROL for pam_loginuid, as on the
// login nodes; no SYS_ADMIN, SYS_MODULE, SYS_RAWIO, NET_ADMIN, BPF or the like, which the
// privileged slurmd container has. User namespaces a session makes (rootless Podman) hold a
// full set inside them only.
var SSHDCapabilities = []string{"chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw", "setgid", "setuid",
	"setfcap", "setpcap", "net_bind_service", "sys_chroot", "kill", "audit_write", "audit_control"}

// SSHDCgroup is the cgroup (in the container's cgroup namespace) sshd and its sessions start in
// on a cgroup v2 node: slurmd moves itself to a cgroup of its own and then enables controllers
// for the container cgroup's children, which cgroup v2 refuses while that cgroup holds a
// process. On a cgroup v1 node (Slurm's cgroup/v1) sshd stays where the container started it.
const SSHDCgroup = "/sys/fs/cgroup/sshd"

// SSHDScript runs a worker's sshd in the slurmd container, beside slurmd, for ever: it is started
// again when it exits. Its arguments are sshd's command line. It runs there, not in a container
// of its own, so that pam_slurm_adopt can have slurmstepd move a session into its job's cgroup:
// the kernel lets a process move another only between cgroups inside its own cgroup namespace,
// which is its container's. sshd starts in a cgroup of its own (SSHDCgroup, cgroup v2) and with a bounded
// capability set (SSHDCapabilities), so that neither sshd nor a session, root's included, has
// the privileged container's capabilities.
var SSHDScript = `cg=` + SSHDCgroup + `
if [ -f /sys/fs/cgroup/cgroup.controllers ] && ! { mkdir -p "$cg" && echo $$ >"$cg/cgroup.procs"; }; then
  echo "sshd: cannot start in the cgroup $cg: ssh sessions may not join their jobs" >&2
fi
install -d -m 0755 "$(dirname ` + AdminGroupsFile + `)"
printf '%s\n' $SSH_ADMIN_GROUPS >` + AdminGroupsFile + `
while :; do
  setpriv --bounding-set -all,+` + strings.Join(SSHDCapabilities, ",+") + ` -- "$@"
  echo "sshd exited with status $?; starting it again in 2 s" >&2
  sleep 2
done
`

// WorkerScript is the slurmd container's: sshd in the background (SSHDScript, given as
// $SSHD_SCRIPT, with this script's arguments), then slurmd (SlurmdScript), once sshd's
// supervisor has left the container's cgroup (for at most 10 s): slurmd enables controllers for
// the container cgroup's children, which the kernel refuses while a process is in it.
const WorkerScript = workerPrelude + SlurmdScript

// ElasticWorkerScript is WorkerScript for an elastic set's pods (ElasticSlurmdScript).
var ElasticWorkerScript = workerPrelude + ElasticSlurmdScript

const workerPrelude = `/bin/sh -c "$SSHD_SCRIPT" sshd "$@" &
unset SSHD_SCRIPT
i=0
while [ $i -lt 100 ] && grep -qx $! /sys/fs/cgroup/cgroup.procs 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
`

// ReadyScript succeeds when slurmctld has heard from this node: its state is known and not
// marked "not responding" (a trailing *).
const ReadyScript = `state=$(scontrol show node "$SLURM_NODE_NAME" -o 2>/dev/null | sed -n 's/.* State=\([^ ]*\).*/\1/p')
case "$state" in ""|*'*'*|*NOT_RESPONDING*|UNKNOWN*|FUTURE*) echo "node $SLURM_NODE_NAME: ${state:-unknown to slurmctld}"; exit 1 ;; esac
`

// PreStopScript runs when the worker pod is stopped. It drains the node so no new job lands on
// it, unless something (an admin, a scale-down, an update) drained or downed it already, whose
// reason is kept; then it waits for the node's jobs to end, within the pod's grace period.
// It never sets the node down: that would kill its jobs.
//
// Only an answer from slurmctld that lists no job ends the wait early, or one that does not list
// the node at all (a scale-down removed it from slurm.conf before the pod stopped: nothing can
// run on it), or one that says Slurm powered it down (an elastic set's idle node: a drain would
// outlast the power-down and keep the node from jobs when Slurm powers it up again). When slurmctld does not answer (it is being rescheduled too, say, in the same node
// drain), squeue prints nothing and fails: that is not "idle", so the node itself is asked
// instead: a job step on it has a slurmstepd in this container. The drain is tried again until
// slurmctld takes it. The kubelet's grace period bounds the wait either way.
const PreStopScript = `node=$SLURM_NODE_NAME
drained=""
while :; do
  if [ -z "$drained" ]; then
    line=$(scontrol show node "$node" -o 2>&1)
    case "$line" in *"Node $node not found"*) echo "slurmctld lists no node $node: no job can run here"; break ;; esac
    state=$(printf '%s\n' "$line" | sed -n 's/.* State=\([^ ]*\).*/\1/p')
    case "$state" in
      "") echo "slurmctld does not answer; asking this node for job steps" ;;
      *POWERING_DOWN*|*POWERED_DOWN*) echo "Slurm powered node $node down: no job runs here"; break ;;
      *DRAIN*|*DOWN*|*FAIL*) drained=1 ;;
      *) scontrol update nodename="$node" state=drain reason="` + slurmfacts.DrainPodStopping + `" && drained=1 ;;
    esac
  fi
  if jobs=$(squeue -h -w "$node" -o %i 2>&1); then
    [ -z "$jobs" ] && break
  else
    case "$jobs" in *"Invalid node name $node"*) echo "slurmctld lists no node $node: no job can run here"; break ;; esac
    grep -qsx slurmstepd /proc/[0-9]*/comm || break
  fi
  sleep 5
done
`

// gpuRequests are the extended resources a worker asks for: whole GPUs, or MIG devices of each
// profile (MIG strategy mixed).
func gpuRequests(g base.GPU) map[corev1.ResourceName]int32 {
	out := map[corev1.ResourceName]int32{}
	for _, m := range g.MIG {
		out[corev1.ResourceName("nvidia.com/mig-"+m.Profile)] = m.Count
	}
	if len(g.MIG) == 0 && g.Count > 0 {
		out[slurmfacts.GPUResource] = g.Count
	}
	return out
}

// requireNodeLabels adds the labels to every required node affinity term (terms are ORed, so
// each one must carry them), or makes a term of them when there is none.
func requireNodeLabels(pod *corev1.PodSpec, labels map[string]string) {
	if len(labels) == 0 {
		return
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var exprs []corev1.NodeSelectorRequirement
	for _, k := range keys {
		exprs = append(exprs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{labels[k]}})
	}
	if pod.Affinity == nil {
		pod.Affinity = &corev1.Affinity{}
	}
	if pod.Affinity.NodeAffinity == nil {
		pod.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	req := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(req.NodeSelectorTerms) == 0 {
		req.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchExpressions = append(req.NodeSelectorTerms[i].MatchExpressions, exprs...)
	}
}

// BusyPodDisruptionBudget refuses every voluntary eviction (kubectl drain, the cluster
// autoscaler, node upgrades) of a worker pod while its node runs jobs. Idle workers can be
// evicted freely.
func BusyPodDisruptionBudget(in base.Input) *policyv1.PodDisruptionBudget {
	sc := in.Cluster
	sel := base.SelectorLabels(sc, comp)
	sel[base.LabelBusy] = "true"
	zero := intstr.FromInt32(0)
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   base.TypeMeta("policy/v1", "PodDisruptionBudget"),
		ObjectMeta: base.ObjectMeta(sc, sc.BusyPodDisruptionBudgetName(), comp),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &zero,
			Selector:       &metav1.LabelSelector{MatchLabels: sel},
		},
	}
}
