// Package slurmfacts is the one home of the facts about Slurm, munge and the project's images
// that more than one package needs: the daemons' users, ports and paths, the drain reasons the
// operator sets, the GPU resource name and the jail's marker. It imports nothing, so the
// renderers, the Slurm client, the GPU shape and the jail entrypoint all take them from here;
// the shell scripts the renderers ship (the populate Job, the node health check) receive them
// from the renderers through placeholders or the environment, never by writing them again.
package slurmfacts

// Users of the images (Debian's packages). The images pin their ids (slurm 64030 as in Debian,
// munge 64031) so that every image and the jail agree on who owns a file or a socket.
const (
	// SlurmUser runs slurmctld and slurmdbd (SlurmUser in slurm.conf and slurmdbd.conf), and is
	// the user the operator's JWTs speak for.
	SlurmUser = "slurm"
	// MungeUser runs munged.
	MungeUser = "munge"
	// MetricsUser is the unprivileged Slurm user the exporter's tokens speak for: it can read
	// what any user may read and nothing more, and slurmctld refuses its job submissions
	// (job_submit.lua), so a stolen exporter token can neither run nor cancel anything.
	MetricsUser = "slurm-metrics"
	// MetricsUID is MetricsUser's uid and gid in every image and in the jail.
	MetricsUID = 64032
	// NobodyUID runs slurmrestd: it needs no files and no privileges.
	NobodyUID int64 = 65534
)

// Ports the daemons listen on.
const (
	SlurmctldPort  = 6817
	SlurmdPort     = 6818
	SlurmdbdPort   = 6819
	SlurmrestdPort = 6820
	// ExporterPort serves the Slurm exporter's metrics.
	ExporterPort = 9341
	// MariaDBPort is where the accounting database listens when mariadb-operator runs it.
	MariaDBPort = 3306
	// SrunPortMin and SrunPortMax bound SrunPortRange: the ports srun and salloc listen on for
	// slurmctld's messages, their steps' I/O and slurmstepd's callbacks. A fixed range lets the
	// NetworkPolicies open it; 3000 ports allow about 700 concurrent sruns (each takes about 4).
	SrunPortMin = 60001
	SrunPortMax = 63000
)

// Paths inside the daemons' containers and the jail.
const (
	// ConfDir holds slurm.conf and the files it includes, for every daemon and in the jail.
	ConfDir = "/etc/slurm"
	// StateSaveLocation is slurmctld's state directory (its spool volume).
	StateSaveLocation = "/var/spool/slurmctld"
	// SlurmdSpoolDir is slurmd's spool directory.
	SlurmdSpoolDir = "/var/spool/slurmd"
	// MungeKeyDir holds the key munged reads.
	MungeKeyDir = "/etc/munge"
	// MungeKeyFile is the file name munged reads, and the key of the munge key in its Secret.
	MungeKeyFile = "munge.key"
	// MungeSocketDir holds munged's socket; slurmd, slurmctld and the tools in the jail find it there.
	MungeSocketDir = "/run/munge"
	// MungeSocket is munged's socket in MungeSocketDir.
	MungeSocket = MungeSocketDir + "/munge.socket.2"
	// JWTKeyDir holds the HS256 key slurmctld and slurmdbd verify JWTs with.
	JWTKeyDir = "/etc/slurm-jwt"
	// JWTKeyFile is the key's file name in JWTKeyDir, and its key in the Secret.
	JWTKeyFile = "jwt_hs256.key"
	// JailEntrypoint is the program of the login and worker images that runs a command
	// chrooted in the jail.
	JailEntrypoint = "/usr/local/bin/slurm-jail-exec"
	// NodeGresConf is where a worker's entrypoint writes the gres.conf lines of the GPUs the
	// device plugin gave its pod (in the container's /run, which the jail shows); the generated
	// gres.conf includes it.
	NodeGresConf = RunDir + "/gres.conf"
	// RunDir holds what a pod's entrypoint writes for Slurm (in the container's /run).
	RunDir = "/run/slurm-operator"
	// JailMarkerFile is the file, at the jail's root, that the populate Job writes when the jail
	// holds a complete copy of the jail image. The jail entrypoint refuses a jail without it,
	// and the node health check looks for it.
	JailMarkerFile = ".slurm-operator-populated"
)

// Drain reasons. Every drain the operator (or a script it ships) sets has a reason starting
// with DrainReasonPrefix, and the operator lifts only drains with that prefix: an admin's
// drain is never touched.
const (
	DrainReasonPrefix = "slurm-operator: "
	// DrainUpdate drains a worker whose pod is replaced by a rolling update.
	DrainUpdate = DrainReasonPrefix + "update"
	// DrainScaleDown drains a worker that a scale-down removes.
	DrainScaleDown = DrainReasonPrefix + "scale-down"
	// DrainPodStopping drains a worker whose pod stops (its preStop hook).
	DrainPodStopping = DrainReasonPrefix + "pod stopping"
	// DrainHealth starts the reason of a node the health check drained.
	DrainHealth = DrainReasonPrefix + "health:"
	// DrainKubernetesNode starts the reason of a worker whose Kubernetes node is cordoned, not
	// ready, short of GPUs, or has a problem condition; the rest of the reason says which.
	DrainKubernetesNode = DrainReasonPrefix + "kubernetes node"
	// DrainCheck starts the reason of a worker an active check drained ("… check NAME: OUTPUT").
	DrainCheck = DrainReasonPrefix + "check "
	// CommentPodCannotStart starts the comment of an elastic set's node whose pod Kubernetes
	// cannot start ("… pod cannot start: REASON: MESSAGE"): the scheduler's words while the
	// pod is Pending. A comment, not a drain: Slurm requeues the job of a powering-up node
	// that is drained and powers the node down, which would remove the pod a cluster
	// autoscaler acts on.
	CommentPodCannotStart = DrainReasonPrefix + "pod cannot start"
	// JobCommentWaitsForPod starts the admin comment of a job that waits (CONFIGURING) for an
	// elastic node whose pod Kubernetes cannot start ("… waits for the pod of NODE: REASON:
	// MESSAGE"): squeue's reason for such a job is None. It stays on the job as a record
	// (sacct -o AdminComment).
	JobCommentWaitsForPod = DrainReasonPrefix + "waits for the pod of "
)

// GPUResource is the extended resource the NVIDIA device plugin advertises, and the resource
// worker pods request.
const GPUResource = "nvidia.com/gpu"

// StateUnreadable is in every fatal line slurmctld prints when it cannot read a state file of
// its StateSaveLocation (a file cut short, or one from a release it cannot read) and was not
// started with -i, which would drop what it cannot read.
const StateUnreadable = "start with '-i' to ignore this"

// ContainerCannotStart are the container waiting reasons that do not pass by themselves: the
// kubelet keeps retrying, but the container will not start until someone changes something
// (the image, the pull secret, the spec). ErrImagePull comes first and may be a passing
// registry failure; ImagePullBackOff follows it when the pull keeps failing.
var ContainerCannotStart = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true,
}
