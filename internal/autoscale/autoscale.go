// Package autoscale decides an elastic worker set's pods from slurmctld's node states: Slurm
// chooses which nodes a job needs and powers them up (POWERING_UP); the set's StatefulSet gets
// a pod for every node up to the highest one that is up or powering up; the idle nodes at the
// top are powered down and their pods removed once their idle time has passed. The decision is
// pure: the controller and the real-Slurm test carry it out.
package autoscale

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// Set is an elastic set as the decision sees it.
type Set struct {
	// Name is the set's name: its nodes are Name-0 … Name-(MaxSize-1).
	Name string
	// MinSize nodes always have a pod; MaxSize nodes are in slurm.conf.
	MinSize, MaxSize int32
	// IdleTimeout is how long a node runs no job before it is powered down.
	IdleTimeout time.Duration
}

// Plan is what to do now.
type Plan struct {
	// Pods is the set's StatefulSet replicas: a pod for each of Name-0 … Name-(Pods-1).
	Pods int32
	// PowerUp are nodes below Pods that Slurm holds powered down with no job: they are asked
	// up before their pods start, so that slurmctld expects them (a pod of a node Slurm did not
	// power up sits between a Slurm-chosen node and the top, or within MinSize). A node Slurm
	// allocated to a job is left to Slurm, which powers it up itself.
	PowerUp []string
	// PowerDown are the idle nodes at the top whose idle time has passed, highest first: Slurm
	// powers them down (once they run nothing), and a later plan removes their pods.
	PowerDown []string
	// Up, PoweringUp, Down and Failed count the set's nodes: powered up, powering up, powered
	// down (or powering down), and powered down and DOWN (a resume that timed out, or an
	// admin's down), which Slurm will not power up until the node is resumed.
	Up, PoweringUp, Down, Failed int
}

// NodeName is the set's i-th Slurm node.
func (s Set) NodeName(i int32) string { return fmt.Sprintf("%s-%d", s.Name, i) }

// Holds says whether the Slurm node is one of the set's (up to MaxSize).
func (s Set) Holds(node string) bool {
	i, err := strconv.Atoi(strings.TrimPrefix(node, s.Name+"-"))
	return strings.HasPrefix(node, s.Name+"-") && err == nil && i >= 0 && i < int(s.MaxSize) && s.NodeName(int32(i)) == node
}

// Off says whether Slurm holds the node powered down, or powering down, with nothing on it:
// its pod may go. A powered-down node with a job (allocated, its power-up a moment away) is
// not off.
func Off(n slurm.Node) bool {
	return (n.Has("POWERED_DOWN") || n.Has("POWERING_DOWN")) && !n.Busy()
}

// PoweringUp says whether Slurm is powering the node up: POWERING_UP, or powered down and
// already given a job. Slurm allocates a powered-down node first and marks it POWERING_UP on
// its power-save thread's next pass (up to power_save_interval later, 10 s by default); the
// operator makes the pod at once, and a pod that starts quickly can register before that pass.
func PoweringUp(n slurm.Node) bool {
	return n.Has("POWERING_UP") || n.Has("POWERED_DOWN") && n.Busy()
}

// Decide plans the set from slurmctld's answer (nodes, by name) at now. A node missing from the
// answer is kept with its pod (pods stays at least as high as it): a node Slurm does not account
// for may run jobs. pods is the StatefulSet's current replicas.
func Decide(s Set, nodes map[string]slurm.Node, pods int32, now time.Time) Plan {
	var p Plan
	var top int32 // one above the highest node that needs a pod
	for i := int32(0); i < s.MaxSize; i++ {
		n, listed := nodes[s.NodeName(i)]
		switch {
		case !listed:
			if i < pods {
				top = i + 1
			}
			continue
		case PoweringUp(n):
			p.PoweringUp++
		case Off(n) && n.Has("DOWN"):
			p.Failed++
		case Off(n):
			p.Down++
		default:
			p.Up++
		}
		if i < s.MinSize || !Off(n) {
			top = i + 1
		}
	}
	p.Pods = top
	for i := int32(0); i < p.Pods; i++ {
		if n, ok := nodes[s.NodeName(i)]; ok && Off(n) && !n.Has("POWERING_DOWN") && !n.Has("POWER_UP") {
			p.PowerUp = append(p.PowerUp, s.NodeName(i))
		}
	}
	// Power down from the top while the nodes there have been idle long enough: a node that
	// runs a job, or went idle lately, keeps every node below it (a StatefulSet removes pods
	// from the highest ordinal only).
	for i := p.Pods - 1; i >= s.MinSize; i-- {
		n := nodes[s.NodeName(i)]
		if !idleSince(n, now.Add(-s.IdleTimeout)) {
			break
		}
		p.PowerDown = append(p.PowerDown, s.NodeName(i))
	}
	return p
}

// idleSince says whether the node is up, takes jobs, runs none and has run none since the time
// given (by Slurm's own clock of its last job): it may be powered down. A drained or down node
// is left as it is (an admin's drain, a failed node to look at); so is one already asked down.
func idleSince(n slurm.Node, since time.Time) bool {
	if n.Name == "" || !n.Has("IDLE") || n.Busy() || n.Down() || n.Has("DRAIN") || n.Has("FAIL") ||
		n.Has("POWERING_UP") || n.Has("POWER_DOWN") || n.Has("POWERING_DOWN") || n.Has("POWERED_DOWN") || n.Has("RESERVED") {
		return false
	}
	if !n.LastBusy.Set || n.LastBusy.Number == 0 {
		return false
	}
	return time.Unix(n.LastBusy.Number, 0).Before(since)
}

// maxComment bounds the Kubernetes words a node's comment carries (the scheduler's message
// names every node group it tried).
const maxComment = 240

// CannotStart decides the comments of the set's nodes for pods Kubernetes cannot start (why,
// by Slurm node name, in Kubernetes' words: the scheduler's while a pod is Pending), as the
// comments to write, by node ("" clears one). A node Slurm is powering up (or holds up) whose
// pod cannot start is commented with those words (slurmfacts.CommentPodCannotStart): `scontrol
// show node` and `sinfo -O NodeList,Comment` say why its job waits. The comment stays when
// Slurm downs the node at ResumeTimeout (its reason says only that the time passed), and goes
// once the node is neither waiting for such a pod nor down. A comment someone else wrote is
// left alone.
func CannotStart(s Set, nodes map[string]slurm.Node, why map[string]string) map[string]string {
	out := map[string]string{}
	for i := int32(0); i < s.MaxSize; i++ {
		name := s.NodeName(i)
		n, listed := nodes[name]
		ours := strings.HasPrefix(n.Comment, slurmfacts.CommentPodCannotStart)
		if !listed || n.Comment != "" && !ours {
			continue
		}
		want := ""
		switch w := why[name]; {
		case w != "" && !Off(n) && !n.Has("DOWN"):
			// One line whatever Kubernetes wrote: a node comment is one field of sinfo's lines.
			want = slurmfacts.CommentPodCannotStart + ": " + strings.Join(strings.Fields(w), " ")
			if len(want) > maxComment {
				want = strings.ToValidUTF8(want[:maxComment], "")
			}
		case ours && n.Has("DOWN"):
			want = n.Comment // the resume failed: the comment says why
		}
		if want != n.Comment {
			out[name] = want
		}
	}
	return out
}

// WaitingNodes are the set's nodes whose pods Kubernetes cannot start and that are not down,
// with Kubernetes' words, by node (comments: the nodes' comments once CannotStart's are
// written).
func WaitingNodes(s Set, nodes map[string]slurm.Node, comments map[string]string) map[string]string {
	out := map[string]string{}
	for i := int32(0); i < s.MaxSize; i++ {
		name := s.NodeName(i)
		c, ok := comments[name]
		if !ok {
			c = nodes[name].Comment
		}
		if why, ours := strings.CutPrefix(c, slurmfacts.CommentPodCannotStart+": "); ours && !nodes[name].Has("DOWN") {
			out[name] = why
		}
	}
	return out
}

// JobComments decides the admin comments of the jobs that wait for the set's nodes whose pods
// cannot start (waiting, from WaitingNodes), by job id: a job CONFIGURING on such a node gets
// the node's words, so that the job itself says why it waits (squeue's reason for it is None).
// A job's admin comment someone else wrote is left alone, one that already says so is not
// written again, and one that names another set's node is that set's to keep (a job on nodes
// of two sets is commented once, not by each set in turn). The comment stays once the job
// runs: sacct keeps it as the record of the wait.
func JobComments(s Set, waiting map[string]string, jobs []slurm.Job) map[int64]string {
	out := map[int64]string{}
	for _, j := range jobs {
		named, ours := strings.CutPrefix(j.AdminComment, slurmfacts.JobCommentWaitsForPod)
		named, _, _ = strings.Cut(named, ": ")
		if !slices.Contains(j.State, "CONFIGURING") || j.Resources == nil ||
			j.AdminComment != "" && (!ours || !s.Holds(named)) {
			continue
		}
		for _, name := range j.NodeNames() {
			if why, ok := waiting[name]; ok {
				want := slurmfacts.JobCommentWaitsForPod + name + ": " + why
				if len(want) > maxComment {
					want = strings.ToValidUTF8(want[:maxComment], "")
				}
				if want != j.AdminComment {
					out[j.ID] = want
				}
				break
			}
		}
	}
	return out
}
