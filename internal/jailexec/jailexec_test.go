package jailexec

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

func TestParseBind(t *testing.T) {
	good := map[string]Bind{
		"/a:/b":    {Source: "/a", Target: "/b"},
		"/a:/b:ro": {Source: "/a", Target: "/b", ReadOnly: true},
	}
	for in, want := range good {
		got, err := ParseBind(in)
		if err != nil || got != want {
			t.Errorf("ParseBind(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/a", "a:/b", "/a:b", "/a:/b:rw", "/a:/", "/a:/b:ro:x"} {
		if _, err := ParseBind(in); err == nil {
			t.Errorf("ParseBind(%q) accepted", in)
		}
	}
}

// Links inside the jail are followed as the chrooted process would see them, and can never
// lead a mount out of the jail.
func TestResolveInJailStaysInTheJail(t *testing.T) {
	jail := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(jail, "etc"), 0o755))
	must(t, os.MkdirAll(filepath.Join(jail, "run/systemd/resolve"), 0o755))
	must(t, os.Symlink("../run/systemd/resolve/stub-resolv.conf", filepath.Join(jail, "etc/resolv.conf")))
	must(t, os.Symlink("/../../../../etc", filepath.Join(jail, "escape")))
	must(t, os.Symlink("loop", filepath.Join(jail, "loop")))
	cases := map[string]string{
		"/etc/resolv.conf": "/run/systemd/resolve/stub-resolv.conf",
		"/escape/passwd":   "/etc/passwd",
		"/../../etc/hosts": "/etc/hosts",
		"/var/spool/new":   "/var/spool/new",
	}
	for in, want := range cases {
		got, err := resolveInJail(jail, in)
		if err != nil || got != filepath.Join(jail, want) {
			t.Errorf("resolveInJail(%q) = %q, %v; want %q", in, got, err, filepath.Join(jail, want))
		}
	}
	if _, err := resolveInJail(jail, "/loop/x"); err == nil {
		t.Error("a link loop was followed forever")
	}
}

func TestCheckPopulated(t *testing.T) {
	jail := t.TempDir()
	if err := CheckPopulated(jail); err == nil {
		t.Fatal("an empty jail is populated")
	}
	must(t, os.WriteFile(filepath.Join(jail, slurmfacts.JailMarkerFile), []byte("x"), 0o644))
	if err := CheckPopulated(jail); err != nil {
		t.Fatal(err)
	}
}

// FindDriver finds what the NVIDIA toolkit puts in a container, by name and by ELF soname, and
// nothing else.
func TestFindDriver(t *testing.T) {
	root := fakeDriverRoot(t)
	d, err := FindDriver(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range d.Files {
		names = append(names, f.Name)
	}
	wantNames := []string{"libcuda.so.555.1", "libnvidia-ml.so.1", "libnvidia-ml.so.555.1", "nvidia-smi"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("files = %v, want %v", names, wantNames)
	}
	if want := []string{"libcuda.so.1", "libnvidia-ml.so.1"}; !reflect.DeepEqual(d.Sonames, want) {
		t.Errorf("sonames = %v, want %v", d.Sonames, want)
	}
	if got := d.sonameTargets(root); !reflect.DeepEqual(got, map[string]string{"libcuda.so.1": "libcuda.so.555.1"}) {
		t.Errorf("links to make = %v", got)
	}
	empty, err := FindDriver(t.TempDir())
	if err != nil || len(empty.Files) != 0 {
		t.Errorf("a root without a driver: %+v, %v", empty, err)
	}
}

// GKE's driver installer mounts the node's driver at /usr/local/nvidia instead: it is found there.
func TestFindDriverUnderUsrLocalNvidia(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is needed to build stand-in driver libraries")
	}
	root := t.TempDir()
	lib := filepath.Join(root, "usr/local/nvidia/lib64")
	must(t, os.MkdirAll(lib, 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "usr/local/nvidia/bin"), 0o755))
	buildLib(t, filepath.Join(lib, "libnvidia-ml.so.570.1"), "libnvidia-ml.so.1", "stand-in NVML")
	must(t, os.Symlink("libnvidia-ml.so.570.1", filepath.Join(lib, "libnvidia-ml.so.1")))
	// The real program is ELF; /usr/bin holds a wrapper that runs it by this container's path.
	must(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "usr/bin/nvidia-smi"), []byte("#!/bin/sh\nexec /usr/local/nvidia/bin/nvidia-smi \"$@\"\n"), 0o755))
	elf, err := os.ReadFile(filepath.Join(lib, "libnvidia-ml.so.570.1"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "usr/local/nvidia/bin/nvidia-smi"), elf, 0o755))
	d, err := FindDriver(root)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range d.Files {
		paths = append(paths, f.Path)
	}
	want := []string{"/usr/local/nvidia/lib64/libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.570.1", "/usr/local/nvidia/bin/nvidia-smi"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("files = %v, want %v", paths, want)
	}
}

// fakeDriverRoot is a container root as the toolkit leaves it: NVML with its soname link,
// libcuda without one, nvidia-smi, and libraries that are not the driver's.
func fakeDriverRoot(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is needed to build stand-in driver libraries")
	}
	root := t.TempDir()
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	must(t, os.MkdirAll(lib, 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	buildLib(t, filepath.Join(lib, "libnvidia-ml.so.555.1"), "libnvidia-ml.so.1", "stand-in NVML")
	must(t, os.Symlink("libnvidia-ml.so.555.1", filepath.Join(lib, "libnvidia-ml.so.1")))
	buildLib(t, filepath.Join(lib, "libcuda.so.555.1"), "libcuda.so.1", "stand-in CUDA driver")
	buildLib(t, filepath.Join(lib, "libcudart.so.12"), "libcudart.so.12", "not the driver's")
	buildLib(t, filepath.Join(lib, "libz.so.1"), "libz.so.1", "not the driver's")
	must(t, os.WriteFile(filepath.Join(root, "usr/bin/nvidia-smi"), []byte("#!/bin/sh\necho 'GPU 0: Stand-In GPU (UUID: GPU-stand-in)'\n"), 0o755))
	return root
}

func buildLib(t *testing.T, out, soname, name string) {
	t.Helper()
	cmd := exec.Command("gcc", "-shared", "-fPIC", "-o", out, "-Wl,-soname,"+soname, `-DNAME="`+name+`"`, "testdata/fakelib.c")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
