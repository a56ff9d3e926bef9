package slurmconf

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/base"
	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

func cluster(workers int32) *slurmv1alpha1.SlurmCluster {
	sc := &slurmv1alpha1.SlurmCluster{}
	sc.Name = "demo"
	sc.Spec.ClusterName = "demo"
	sc.Spec.SlurmNodes.Worker.Size = workers
	return base.WithDefaults(sc)
}

func TestRangeCompressesNodeLists(t *testing.T) {
	for _, tc := range []struct {
		n    int32
		want string
	}{{0, ""}, {1, "worker-0"}, {2, "worker-[0-1]"}, {1024, "worker-[0-1023]"}} {
		if got := Range("worker", tc.n); got != tc.want {
			t.Errorf("Range(worker, %d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestSlurmConfDoesNotGrowWithTheWorkerCount(t *testing.T) {
	small := slurmBaseConf(base.Input{Cluster: cluster(8)})
	large := slurmBaseConf(base.Input{Cluster: cluster(4096)})
	if len(large)-len(small) > 16 {
		t.Fatalf("slurm.conf grew by %d bytes from 8 to 4096 workers", len(large)-len(small))
	}
	if !strings.Contains(large, "NodeName=worker-[0-4095] NodeAddr=demo-worker-[0-4095]") {
		t.Fatalf("node line missing:\n%s", large)
	}
}

func TestUserLinesComeLastSoTheyWin(t *testing.T) {
	conf := slurmConf()
	base := strings.Index(conf, "Include "+SlurmBaseConf)
	extra := strings.Index(conf, "Include "+SlurmExtraConf)
	if base < 0 || extra < 0 || extra < base {
		t.Fatalf("slurm.conf must include the base first and the user's lines last:\n%s", conf)
	}
}

func TestANewlineInUserTextCannotAddASetting(t *testing.T) {
	sc := cluster(1)
	sc.Spec.SlurmConfig.ExtraSlurmConf = []slurmv1alpha1.ConfigLine{"MaxJobCount=5\nSlurmUser=root"}
	line := slurmv1alpha1.ProgramPaths("/bin/true\nEpilog=/evil")
	sc.Spec.SlurmConfig.Prolog = &line
	out := slurmExtraConf(sc) + slurmBaseConf(base.Input{Cluster: sc})
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "SlurmUser=root") || strings.HasPrefix(l, "Epilog=") {
			t.Fatalf("user text started a new setting: %q", l)
		}
	}
}

func TestCgroupOverridesReplaceGeneratedKeys(t *testing.T) {
	sc := cluster(1)
	sc.Spec.SlurmConfig.CgroupConfig = map[string]slurmv1alpha1.CgroupValue{"ConstrainRAMSpace": "no", "AllowedRAMSpace": "95"}
	out := cgroupConf(sc)
	if strings.Count(out, "ConstrainRAMSpace=") != 1 || !strings.Contains(out, "ConstrainRAMSpace=no") {
		t.Fatalf("override not applied once:\n%s", out)
	}
	if !strings.Contains(out, "AllowedRAMSpace=95") || !strings.Contains(out, "CgroupPlugin=autodetect") {
		t.Fatalf("added or generated key missing:\n%s", out)
	}
}

func TestWorkerResourcesLeaveHeadroom(t *testing.T) {
	sc := cluster(1)
	sc.Spec.SlurmNodes.Worker.Resources = slurmv1alpha1.ContainerResources{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")},
	}
	got := WorkerResources(sc)
	if got.CPUs != 16 {
		t.Errorf("CPUs = %d, want the limit 16", got.CPUs)
	}
	if want := int64(65536 - 3276); got.RealMemoryMiB != want {
		t.Errorf("RealMemory = %d, want %d (5%% headroom)", got.RealMemoryMiB, want)
	}
	if h := MemoryHeadroomMiB(2048); h != 1024 {
		t.Errorf("headroom of a small node = %d, want the 1 GiB floor", h)
	}
}

func TestGresFollowsTheGPUShape(t *testing.T) {
	in := base.Input{Cluster: cluster(4), GPU: base.GPU{Count: 8, Type: "h100"}}
	// The files are each pod's own: its entrypoint writes them, and gres.conf includes them.
	if g := gresConf(in); !strings.Contains(g, "\nInclude "+slurmfacts.NodeGresConf+"\n") || strings.Contains(g, "File=") {
		t.Fatalf("gres.conf:\n%s", g)
	}
	if f := strings.Join(WorkerGPUFlags(in, in.Cluster.WorkerSets()[0]), " "); f != "--gpus 8 --gres-conf "+slurmfacts.NodeGresConf+" --gpu-type h100" {
		t.Fatalf("worker entrypoint flags: %q", f)
	}
	if s := slurmBaseConf(in); !strings.Contains(s, "Gres=gpu:h100:8") || !strings.Contains(s, "GresTypes=gpu") {
		t.Fatalf("slurm.conf:\n%s", s)
	}
	cpu := base.Input{Cluster: cluster(4)}
	if s := slurmBaseConf(cpu); strings.Contains(s, "Gres") {
		t.Fatalf("CPU-only workers got gres:\n%s", s)
	}
}

// Each AutoDetect mode as slurmd reads it. "nvidia" is what the default images' slurmd can do
// (their Slurm has no gpu/nvml plugin); MIG always asks NVML, the only mode that sees it.
func TestGresAutoDetectModes(t *testing.T) {
	for _, tc := range []struct {
		mode      slurmv1alpha1.GresAutoDetect
		mig       bool
		want      string
		filesLine bool
	}{
		{slurmv1alpha1.GresAutoDetectOff, false, "AutoDetect=off", true},
		{slurmv1alpha1.GresAutoDetectNVIDIA, false, "AutoDetect=nvidia", false},
		{slurmv1alpha1.GresAutoDetectNVML, false, "AutoDetect=nvml", false},
		{slurmv1alpha1.GresAutoDetectNVIDIA, true, "AutoDetect=nvml", false},
	} {
		in := base.Input{Cluster: cluster(2), GPU: base.GPU{Count: 8, Type: "h200"}}
		in.Cluster.Spec.SlurmNodes.Worker.GresAutoDetect = tc.mode
		if tc.mig {
			in.GPU = base.GPU{MIG: []base.MIGDevice{{Profile: "1g.18gb", Count: 7}}}
		}
		g := gresConf(in)
		if !strings.Contains(g, "\n"+tc.want+"\n") {
			t.Errorf("%s (mig %v): want %s in\n%s", tc.mode, tc.mig, tc.want, g)
		}
		if got := strings.Contains(g, "Include "+slurmfacts.NodeGresConf); got != tc.filesLine {
			t.Errorf("%s (mig %v): the pod's device files included = %v, want %v:\n%s", tc.mode, tc.mig, got, tc.filesLine, g)
		}
		// Whole GPUs are the pod's own in every mode (the jail shows no other); MIG is NVML's.
		flags := strings.Join(WorkerGPUFlags(in, in.Cluster.WorkerSets()[0]), " ")
		if want := map[bool]string{true: "", false: "--gpus 8"}[tc.mig]; !strings.HasPrefix(flags, want) || (tc.mig && flags != "") {
			t.Errorf("%s (mig %v): entrypoint flags %q", tc.mode, tc.mig, flags)
		}
		if got := strings.Contains(flags, "--gres-conf"); got != tc.filesLine {
			t.Errorf("%s (mig %v): entrypoint writes gres lines = %v, want %v", tc.mode, tc.mig, got, tc.filesLine)
		}
	}
}

func TestCheckValueRefusesWhatASlurmFileCannotHold(t *testing.T) {
	for v, ok := range map[string]bool{
		"s3cr3t-Pa55_word.!":     true,
		"":                       false,
		"pass word":              false,
		"pass#word":              false,
		"pass\nStorageUser=root": false,
		`pa"ss`:                  false,
	} {
		if err := CheckValue(v); (err == nil) != ok {
			t.Errorf("CheckValue(%q) = %v", v, err)
		}
	}
}
