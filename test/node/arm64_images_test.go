package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// arm64Programs are programs of each pushed image (paths in its file system) that must be
// arm64 programs in its arm64 image: the Go programs cross-compiled, the Slurm and munge daemons
// installed from Debian's arm64 packages.
var arm64Programs = map[string][]string{
	"slurm-operator": {"manager"},
	"exporter":       {"slurm-exporter"},
	"slurmctld":      {"usr/sbin/slurmctld-wlm", "usr/sbin/munged"},
	"slurmdbd":       {"usr/sbin/slurmdbd"},
	"munge":          {"usr/sbin/munged"},
	"slurmd":         {"usr/local/bin/slurm-jail-exec", "opt/slurm-operator/slurm/root/usr/sbin/slurmd-wlm"},
	"login":          {"usr/local/bin/slurm-jail-exec", "opt/slurm-operator/slurm/root/usr/bin/srun"},
	"jail":           {"jail/usr/bin/bash"},
}

// runArm64Images runs the pushed arm64 images' programs on this amd64 machine, under QEMU's
// arm64 emulator (hack/binfmt.sh), from their file systems as `crane export` pulls them: each
// daemon says its version, and the worker's Slurm, laid over the jail as a worker pod shows it
// (the bundle's root at Slurm's standard paths), runs in the jail: slurmd reads the node's
// hardware, srun and sinfo load their plugins, and the jail's Python finds mpi4py. Then the arm64
// slurmctld and the jail's slurmd make a one-node cluster (testdata/arm64-slurm.sh) that runs a
// job step and a batch job on arm64.
func runArm64Images(t *testing.T, e *env, crane string, images map[string]string) {
	t.Helper()
	for _, name := range []string{"slurmctld", "slurmdbd", "munge", "slurmd", "jail"} {
		if images[name] == "" {
			t.Fatalf("no arm64 image of %s was pushed", name)
		}
	}
	// images-push removes the emulator it registered; these programs need it again.
	if exec.Command(filepath.Join(e.root, "hack/binfmt.sh"), "--check").Run() != nil {
		e.sh("", "hack/binfmt.sh")
		t.Cleanup(func() { _, _ = e.run(context.Background(), "", "hack/binfmt.sh", "--remove") })
	}
	dir := t.TempDir()
	unpack := func(name string) string {
		root := filepath.Join(dir, name)
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		e.sh("", "sh", "-c", `"$0" export "$1" - | tar -x --numeric-owner -C "$2"`, crane, images[name], root)
		return root
	}
	// run runs a program of an image's file system in a chroot with /proc and /sys, as an arm64
	// program, and returns what it printed.
	run := func(root string, argv ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		script := `mkdir -p "$0/proc" "$0/sys" && mount -t proc proc "$0/proc" && mount --rbind /sys "$0/sys" && exec chroot "$0" "$@"`
		out, err := exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "--",
			"sh", "-c", script, root}, argv...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s in %s: %v\n%s", strings.Join(argv, " "), filepath.Base(root), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	expect := func(what, got string, want *regexp.Regexp) {
		t.Helper()
		if !want.MatchString(got) {
			t.Errorf("%s printed %q, want %s", what, got, want)
		} else {
			t.Logf("arm64: %s: %s", what, want.FindString(got))
		}
	}

	ctl := unpack("slurmctld")
	expect("uname -m in the slurmctld image", run(ctl, "uname", "-m"), regexp.MustCompile(`^aarch64$`))
	expect("slurmctld -V", run(ctl, "slurmctld", "-V"), regexp.MustCompile(`^slurm(-wlm)? 24\.11\.`))
	// slurmdbd reads its configuration before it says its version: the smallest one, as the
	// operator's would be owned and moded.
	dbd := unpack("slurmdbd")
	conf := "DbdHost=localhost\nSlurmUser=root\nStorageType=accounting_storage/mysql\n"
	if err := os.WriteFile(filepath.Join(dbd, "etc/slurm/slurmdbd.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	expect("slurmdbd -V", run(dbd, "slurmdbd", "-V"), regexp.MustCompile(`(?m)^slurm(-wlm)? 24\.11\.`))
	expect("munged -V", run(unpack("munge"), "munged", "-V"), regexp.MustCompile(`^munge-0\.5\.`))

	// The jail with the worker image's Slurm over it.
	jail := filepath.Join(unpack("jail"), "jail")
	worker := unpack("slurmd")
	e.sh("", "cp", "-a", filepath.Join(worker, "opt/slurm-operator/slurm/root")+"/.", jail+"/")
	// The links the bundle's manifest names (Debian's alternatives: slurmd -> slurmd-wlm).
	manifest, err := os.ReadFile(filepath.Join(worker, "opt/slurm-operator/slurm/manifest"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(manifest), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "link" {
			_ = os.Remove(filepath.Join(jail, f[1]))
			if err := os.Symlink(f[2], filepath.Join(jail, f[1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The client commands read slurm.conf before they say their version.
	slurmConf := "ClusterName=arm64\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\nPartitionName=all Nodes=ALL Default=YES\n"
	if err := os.WriteFile(filepath.Join(jail, "etc/slurm/slurm.conf"), []byte(slurmConf), 0o644); err != nil {
		t.Fatal(err)
	}
	expect("dpkg --print-architecture in the jail", run(jail, "dpkg", "--print-architecture"), regexp.MustCompile(`^arm64$`))
	expect("slurmd -V in the jail", run(jail, "/usr/sbin/slurmd-wlm", "-V"), regexp.MustCompile(`^slurm(-wlm)? 24\.11\.`))
	expect("slurmd -C in the jail", run(jail, "/usr/sbin/slurmd-wlm", "-C"), regexp.MustCompile(`(?m)^NodeName=\S+ CPUs=[1-9]`))
	expect("srun --version in the jail", run(jail, "srun", "--version"), regexp.MustCompile(`^slurm(-wlm)? 24\.11\.`))
	expect("sinfo --version in the jail", run(jail, "sinfo", "--version"), regexp.MustCompile(`^slurm(-wlm)? 24\.11\.`))
	expect("python3 with mpi4py in the jail", run(jail, "python3", "-c", "import platform, mpi4py; print(platform.machine(), mpi4py.__version__)"),
		regexp.MustCompile(`^aarch64 \d`))

	// A one-node cluster of them: the arm64 slurmctld, and the arm64 slurmd in the jail, run a
	// job step and a batch job, root's and then an ordinary user's from her own shell, and the
	// node is idle after them.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "unshare", "--mount", "--net", "--pid", "--uts", "--fork", "--kill-child", "--propagation", "private", "--",
		"sh", filepath.Join(e.root, "test/node/testdata/arm64-slurm.sh"), jail, ctl).CombinedOutput()
	if err != nil {
		t.Fatalf("a cluster of the arm64 images: %v\n%s", err, out)
	}
	for _, want := range []string{"srun: aarch64", "python3: aarch64", "sbatch: aarch64",
		"alice srun: alice aarch64", "alice sbatch: alice aarch64 ", "node: State=IDLE"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(out) {
			t.Errorf("a cluster of the arm64 images: no line %q in\n%s", want, out)
		}
	}
	t.Logf("arm64: a cluster of the arm64 images:\n%s", out)
}
