package activecheck

import (
	_ "embed"
	"fmt"
	"strings"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

var (
	//go:embed scripts/jail-writable.sh
	jailWritable string
	//go:embed scripts/mpi-allreduce.sh
	mpiAllReduce string
	//go:embed scripts/gpu-errors.sh
	gpuErrors string
	//go:embed scripts/dcgm-diag.sh
	dcgmDiag string
	//go:embed scripts/nccl-allreduce.sh
	ncclAllReduce string
)

// JobNamePrefix starts the name of every check job: slurm-operator-check-NAME.
const JobNamePrefix = "slurm-operator-check-"

// ReasonPrefix starts the drain reason of a node a check drained: "slurm-operator: check NAME: ".
const ReasonPrefix = slurmfacts.DrainCheck

// commentPrefix starts the node comment a check with onFailure Comment sets.
const commentPrefix = "slurm-operator check "

// OutputMax is how much of a check's output its job keeps (the end of it).
const OutputMax = 160

// Check is one of spec.activeChecks with its defaults filled in.
type Check struct {
	Name string
	// Program is the operator's check it runs; empty for a script of the admin's.
	Program      slurmv1alpha1.ActiveCheckProgram
	Script       string
	Interval     time.Duration
	Timeout      time.Duration
	OnFailure    slurmv1alpha1.ActiveCheckReaction
	AfterDrain   bool
	GPUOnly      bool
	FloorPercent int
	DCGMLevel    int
	// MinFreeKB is the free space JailWritable wants in the jail.
	MinFreeKB int64
	// GPUs is each worker's GPU count; a GPU-only check does nothing without GPUs.
	GPUs int
	// InPod runs the check as a Kubernetes Job, from Image (runAs KubernetesJob).
	InPod bool
	Image string
}

// FromSpec returns the cluster's active checks. gpusPerWorker is each worker's GPU count.
func FromSpec(sc *slurmv1alpha1.SlurmCluster, gpusPerWorker int) []Check {
	minFreeKB := int64(1 << 20) // 1 GiB
	if pc := sc.Spec.PeriodicChecks; pc != nil && pc.JailMinFreeSpace != nil {
		minFreeKB = pc.JailMinFreeSpace.Value() / 1024
	}
	var out []Check
	for _, a := range sc.Spec.ActiveChecks {
		c := Check{
			Name: a.Name, Program: a.Program, Script: a.Script,
			Interval:  time.Duration(orDefault(a.IntervalMinutes, 60)) * time.Minute,
			Timeout:   time.Duration(orDefault(a.TimeoutSeconds, 300)) * time.Second,
			OnFailure: a.OnFailure, AfterDrain: a.AfterDrain == nil || *a.AfterDrain,
			GPUOnly:      a.GPUWorkersOnly || a.Program == slurmv1alpha1.ActiveCheckGPUErrors || a.Program == slurmv1alpha1.ActiveCheckDCGMDiag || a.Program == slurmv1alpha1.ActiveCheckNCCLAllReduce,
			FloorPercent: int(orDefault(a.BandwidthFloorPercent, 50)),
			DCGMLevel:    int(orDefault(a.DCGMLevel, 1)),
			MinFreeKB:    minFreeKB,
			GPUs:         gpusPerWorker,
		}
		if a.RunAs == slurmv1alpha1.ActiveCheckKubernetesJob {
			c.InPod, c.Image = true, a.Image
			if c.Image == "" {
				c.Image = sc.Spec.Images.Worker
			}
		}
		if c.OnFailure == "" {
			c.OnFailure = slurmv1alpha1.ActiveCheckDrain
		}
		out = append(out, c)
	}
	return out
}

func orDefault(v, d int32) int32 {
	if v <= 0 {
		return d
	}
	return v
}

// Pairs reports whether the check runs between pairs of workers and compares their bandwidth.
func (c Check) Pairs() bool {
	return c.Program == slurmv1alpha1.ActiveCheckMPIAllReduce || c.Program == slurmv1alpha1.ActiveCheckNCCLAllReduce
}

// Runs reports whether the check runs on workers at all: a GPU-only check needs GPUs.
func (c Check) Runs() bool { return !c.GPUOnly || c.GPUs > 0 }

// JobName is the name of the check's jobs.
func (c Check) JobName() string { return JobNamePrefix + c.Name }

// Reason is the drain reason of a failed run: the check's name and the end of its output.
func (c Check) Reason(output string) string {
	return ReasonPrefix + c.Name + ": " + output
}

// DrainedBy reports whether a node's reason is this check's drain.
func (c Check) DrainedBy(reason string) bool {
	return strings.HasPrefix(reason, ReasonPrefix+c.Name+": ")
}

// comment is the node comment of a failed run when the check only comments.
func (c Check) comment(output string) string {
	return commentPrefix + c.Name + " failed: " + output
}

func (c Check) commented(comment string) bool {
	return strings.HasPrefix(comment, commentPrefix+c.Name+" failed: ")
}

// CheckOfReason returns the name of the check a drain reason names, if any.
func CheckOfReason(reason string) (string, bool) {
	rest, ok := strings.CutPrefix(reason, ReasonPrefix)
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, ": ")
	return name, ok
}

// BatchScript is the job's script: the check's program run in a function, its output's end
// put in the job's comment (where the operator reads it), its exit status the job's. For a
// check that runs as a Kubernetes Job, it only holds the node until the operator ends it.
func (c Check) BatchScript() string {
	if c.InPod {
		return fmt.Sprintf("#!/bin/bash\n# slurm-operator active check %s: holds the node while the check's Kubernetes Job runs.\nexec sleep %d\n",
			c.Name, int((c.Timeout+holdMargin)/time.Second))
	}
	return c.script(`scontrol update jobid="$SLURM_JOB_ID" comment="$msg" >/dev/null 2>&1`)
}

// PodScript is the script of the check's Kubernetes Job: the check's program run in a
// function, its output's end the container's termination message (where the operator reads
// it), its exit status the container's.
func (c Check) PodScript() string {
	return c.script(`printf '%s' "$msg" >/dev/termination-log 2>/dev/null`)
}

// script runs the check's program in a function and hands the end of its output, as msg, to
// report.
func (c Check) script(report string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/bash\n# slurm-operator active check %s: generated by the operator.\n", c.Name)
	b.WriteString("export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n")
	// The job's user (slurm) has no home; Open MPI refuses to start without one.
	b.WriteString("export HOME=/tmp\n")
	fmt.Fprintf(&b, "MIN_FREE_KB=%d\nGPUS=%d\nDCGM_LEVEL=%d\nWINDOW_MIN=%d\n", c.MinFreeKB, c.GPUs, c.DCGMLevel, int(c.Interval/time.Minute))
	b.WriteString("check() {\n")
	b.WriteString(strings.TrimRight(c.body(), "\n"))
	b.WriteString("\n}\n")
	fmt.Fprintf(&b, `out=$(check 2>&1)
rc=$?
msg=$(printf '%%s' "$out" | tr '\n\t' '  ' | sed 's/  */ /g; s/^ //; s/ $//')
[ -n "$msg" ] || msg="exit $rc"
[ "${#msg}" -le %d ] || msg=${msg: -%[1]d}
%s
exit $rc
`, OutputMax, report)
	return b.String()
}

func (c Check) body() string {
	switch c.Program {
	case slurmv1alpha1.ActiveCheckJailWritable:
		return jailWritable
	case slurmv1alpha1.ActiveCheckMPIAllReduce:
		return mpiAllReduce
	case slurmv1alpha1.ActiveCheckGPUErrors:
		return gpuErrors
	case slurmv1alpha1.ActiveCheckDCGMDiag:
		return dcgmDiag
	case slurmv1alpha1.ActiveCheckNCCLAllReduce:
		return ncclAllReduce
	}
	return "(\n" + strings.TrimRight(c.Script, "\n") + "\n)"
}
