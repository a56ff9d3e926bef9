package jailexec

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/slurm-k8s/slurm-operator/internal/slurmfacts"
)

// TestEntrypointInARealJail runs the slurm-jail-exec binary, as root in a private mount and PID
// namespace, on a copy-on-write view of the real Debian 13 root file system the Slurm tests use
// (SLURM_ROOTFS), with a stand-in GPU driver in the "container". It checks what a job in the
// jail sees: the kernel file systems, the container's resolv.conf and hosts, read-only config,
// the driver's libraries loadable by soname and nvidia-smi on the PATH; and that a second call
// in the same namespace only enters the jail.
func TestEntrypointInARealJail(t *testing.T) {
	rootfs := os.Getenv("SLURM_ROOTFS")
	if os.Geteuid() != 0 || rootfs == "" {
		t.Skip("needs root and SLURM_ROOTFS (make test sets it)")
	}
	driver := fakeDriverRoot(t)
	dir, bin, jail, mountJail := overlayJail(t, rootfs)
	dltest := filepath.Join(dir, "share", "dltest")
	must(t, os.MkdirAll(filepath.Dir(dltest), 0o755))
	if b, err := exec.Command("gcc", "-o", dltest, "testdata/dltest.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, b)
	}
	config := filepath.Join(dir, "config")
	must(t, os.MkdirAll(config, 0o755))
	must(t, os.WriteFile(filepath.Join(config, "slurm.conf"), []byte("ClusterName=jailtest\n"), 0o644))
	script := mountJail + `
# The "container's" /run, where the driver is gathered: a tmpfs of this namespace, not the host's.
mount -t tmpfs tmpfs /run
x=` + bin + `
$x --jail ` + jail + ` --driver-from ` + driver + ` --bind ` + config + `:/etc/slurm:ro --bind ` + dir + `/share:/opt/share -- /bin/true
$x --jail ` + jail + ` -- /bin/sh -c '
  set -e
  echo "proc: $(head -1 /proc/self/status)"
  echo "resolv: $(md5sum < /etc/resolv.conf)"
  echo "hosts: $(md5sum < /etc/hosts)"
  echo "conf: $(cat /etc/slurm/slurm.conf)"
  touch /etc/slurm/x 2>/dev/null && echo "conf: writable" || echo "conf: read-only"
  echo "smi: $(nvidia-smi)"
  /opt/share/dltest libnvidia-ml.so.1 libcuda.so.1
  test -c /dev/null && echo "dev: ok"
'
echo "proc mounts: $(awk -v p=` + jail + `/proc '$5 == p' /proc/self/mountinfo | wc -l)"
`
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "--pid", "--fork", "/bin/sh", "-c", script).CombinedOutput()
	got := string(out)
	if err != nil {
		t.Fatalf("%v:\n%s", err, got)
	}
	sum := func(p string) string {
		b, err := exec.Command("sh", "-c", "md5sum < "+p).Output()
		must(t, err)
		return strings.TrimSpace(string(b))
	}
	for _, want := range []string{
		"proc: Name:\t",
		"resolv: " + sum("/etc/resolv.conf"),
		"hosts: " + sum("/etc/hosts"),
		"conf: ClusterName=jailtest",
		"conf: read-only",
		"smi: GPU 0: Stand-In GPU",
		"libnvidia-ml.so.1: stand-in NVML",
		"libcuda.so.1: stand-in CUDA driver",
		"dev: ok",
		"proc mounts: 1\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the jail does not show %q:\n%s", want, got)
		}
	}
	// The shared jail got links to the pod's driver, nothing else of the driver.
	link, err := os.Readlink(filepath.Join(dir, "upper", JailLibDir, "libcuda.so.1"))
	if err != nil || link != RunDriverDir+"/lib/libcuda.so.1" {
		t.Errorf("libcuda.so.1 in the jail: %q, %v", link, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "upper", JailLibDir, "libcuda.so.555.1")); err == nil {
		t.Error("a driver file was copied into the shared jail")
	}
}

// TestPivotLetsJobsMakeUserNamespaces: a process chrooted into the jail may not make a user
// namespace (the kernel's rule, which rootless Podman in a job step runs into); with --pivot
// the command runs in a mount namespace whose root is the jail, and it may, as its children
// may. Both see the jail as their root. The entrypoint itself stays in the first namespace,
// where `kubectl exec` and probes find it, and exits with the command's status.
func TestPivotLetsJobsMakeUserNamespaces(t *testing.T) {
	rootfs := os.Getenv("SLURM_ROOTFS")
	if os.Geteuid() != 0 || rootfs == "" {
		t.Skip("needs root and SLURM_ROOTFS (make test sets it)")
	}
	_, bin, jail, mountJail := overlayJail(t, rootfs)
	script := mountJail + `
mount -t tmpfs tmpfs /run
x=` + bin + `
echo "chroot: $($x --jail ` + jail + ` -- /bin/sh -c 'head -1 /etc/slurm-rootfs-version; unshare --user --map-root-user id -u 2>&1 || true' | tr '\n' ' ')"
echo "pivot: $($x --jail ` + jail + ` --pivot -- /bin/sh -c 'head -1 /etc/slurm-rootfs-version; unshare --user --map-root-user id -u 2>&1' | tr '\n' ' ')"
echo "moved: $(SLURM_JAIL_EXEC_MOVE_ROOT=1 $x --jail ` + jail + ` --pivot -- /bin/sh -c 'head -1 /etc/slurm-rootfs-version; unshare --user --map-root-user id -u 2>&1' | tr '\n' ' ')"
echo "entrypoint stays: $($x --jail ` + jail + ` --pivot -- /bin/sh -c 'test "$(readlink /proc/self/ns/mnt)" != "$(readlink /proc/$PPID/ns/mnt)" && test -x /proc/$PPID/root/` + bin + ` && echo yes')"
$x --jail ` + jail + ` --pivot -- /bin/sh -c 'exit 3' || echo "exit: $?"
`
	// The new PID namespace's own /proc (--mount-proc): the jail binds /proc, and the check of
	// the entrypoint reads /proc/$PPID, which the machine's /proc would answer for another
	// process of the same number, or none.
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--mount-proc", "/bin/sh", "-c", script).CombinedOutput()
	got := string(out)
	if err != nil {
		t.Fatalf("%v:\n%s", err, got)
	}
	version := strings.TrimSpace(strings.SplitN(string(mustRead(t, filepath.Join(rootfs, "etc", "slurm-rootfs-version"))), "\n", 2)[0])
	for _, want := range []string{
		"chroot: " + version + " unshare: unshare failed: Operation not permitted",
		"pivot: " + version + " 0 ",
		// Where pivot_root is refused (RuntimeDefault seccomp, login pods): the jail moved onto /.
		"moved: " + version + " 0 ",
		// The entrypoint stays in the container's namespace (probes enter it), as the parent.
		"entrypoint stays: yes",
		"exit: 3",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}

// overlayJail builds slurm-jail-exec and prepares a copy-on-write jail over rootfs: it returns
// the test's folder, the binary, the jail, and the shell lines that mount the jail and mark it
// populated (run them in a private mount namespace).
func overlayJail(t *testing.T, rootfs string) (dir, bin, jail, mountJail string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "slurm-jail-exec")
	if b, err := exec.Command("go", "build", "-o", bin, "../../cmd/slurm-jail-exec").CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, b)
	}
	for _, d := range []string{"upper", "work", "jail"} {
		must(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	jail = filepath.Join(dir, "jail")
	mountJail = `set -e
mount -t overlay overlay -o lowerdir=` + rootfs + `,upperdir=` + dir + `/upper,workdir=` + dir + `/work ` + jail + `
touch ` + jail + `/` + slurmfacts.JailMarkerFile
	return dir, bin, jail, mountJail
}

func TestARefusedWriteAsRootIsExplainedAsASquashedRoot(t *testing.T) {
	denied := fmt.Errorf("bind a on b: %w", &os.PathError{Op: "mkdir", Path: "/jail/usr/bin/srun", Err: unix.EACCES})
	err := explainDenied(denied, true)
	if !errors.Is(err, unix.EACCES) || !strings.Contains(err.Error(), "no_root_squash") || !strings.Contains(err.Error(), "/jail/usr/bin/srun") {
		t.Errorf("EACCES as root: %v; want the path, the cause kept and no_root_squash named", err)
	}
	if got := explainDenied(denied, false); got != denied {
		t.Errorf("EACCES when not running as root: %v, want it unchanged", got)
	}
	for name, err := range map[string]error{
		"a mount refused (EPERM)": fmt.Errorf("bind: %w", unix.EPERM),
		"a read-only file system": fmt.Errorf("mkdir: %w", unix.EROFS),
	} {
		if got := explainDenied(err, true); got != err {
			t.Errorf("%s: %v, want it unchanged", name, got)
		}
	}
}

// TestTheJailShowsThePodsGPUsOnly: on a node with three GPUs, a pod the device plugin gave the
// second (NVIDIA_VISIBLE_DEVICES=1, as the plugin with deviceIDStrategy=index sets it) shows
// the jail /dev/nvidia1 alone, with its own device numbers, and the rest of /dev as it was (the
// driver's control file, null, the pod's /dev/shm, links, bound files); it writes the node's
// gres.conf line for that GPU; the "container's" /dev keeps every GPU. A pod asking for two
// where the plugin named one does not start.
func TestTheJailShowsThePodsGPUsOnly(t *testing.T) {
	rootfs := os.Getenv("SLURM_ROOTFS")
	if os.Geteuid() != 0 || rootfs == "" {
		t.Skip("needs root and SLURM_ROOTFS (make test sets it)")
	}
	dir, bin, jail, mountJail := overlayJail(t, rootfs)
	node := filepath.Join(dir, "container")
	dev := filepath.Join(node, "dev")
	must(t, os.MkdirAll(filepath.Join(dev, "shm"), 0o755))
	must(t, os.WriteFile(filepath.Join(dev, "shm", "marker"), []byte("the pod's shm"), 0o644))
	must(t, os.WriteFile(filepath.Join(dev, "termination-log"), nil, 0o666))
	must(t, os.Symlink("/proc/self/fd", filepath.Join(dev, "fd")))
	for name, rdev := range map[string][2]uint32{"null": {1, 3}, "nvidia0": {195, 0}, "nvidia1": {195, 1}, "nvidia2": {195, 2}, "nvidiactl": {195, 255}} {
		must(t, unix.Mknod(filepath.Join(dev, name), unix.S_IFCHR|0o666, int(unix.Mkdev(rdev[0], rdev[1]))))
		must(t, os.Chmod(filepath.Join(dev, name), 0o666)) // past the umask
	}
	script := mountJail + `
mount -t tmpfs tmpfs /run
x=` + bin + `
NVIDIA_VISIBLE_DEVICES=1 $x --jail ` + jail + ` --driver-from ` + node + ` --gpus 1 --gres-conf /run/slurm-operator/gres.conf --gpu-type h100 -- /bin/sh -c '
  echo "gpus: $(ls /dev | grep "^nvidia" | tr "\n" " ")"
  echo "numbers: $(stat -c "%n %t:%T %a" /dev/nvidia1 /dev/nvidiactl /dev/null | tr "\n" " ")"
  echo "shm: $(cat /dev/shm/marker)"
  echo "fd: $(readlink /dev/fd)"
  test -f /dev/termination-log && echo "file: bound"
  echo "gres: $(grep -v "^#" /run/slurm-operator/gres.conf)"
'
echo "again: $($x --jail ` + jail + ` -- /bin/sh -c 'ls /dev | grep "^nvidia" | tr "\n" " "')"
echo "container: $(ls ` + dev + ` | grep "^nvidia" | tr "\n" " ")"
`
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "--pid", "--fork", "/bin/sh", "-c", script).CombinedOutput()
	got := string(out)
	if err != nil {
		t.Fatalf("%v:\n%s", err, got)
	}
	for _, want := range []string{
		"gpus: nvidia1 nvidiactl \n",
		"numbers: /dev/nvidia1 c3:1 666 /dev/nvidiactl c3:ff 666 /dev/null 1:3 666 \n",
		"shm: the pod's shm\n",
		"fd: /proc/self/fd\n",
		"file: bound\n",
		"gres: Name=gpu Type=h100 File=/dev/nvidia1\n",
		// Probes and `kubectl exec` enter the same namespace and see the same /dev.
		"again: nvidia1 nvidiactl \n",
		"container: nvidia0 nvidia1 nvidia2 nvidiactl \n",
		"GPUs of this pod: /dev/nvidia1, from NVIDIA_VISIBLE_DEVICES=1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}

	refused := mountJail + `
mount -t tmpfs tmpfs /run
NVIDIA_VISIBLE_DEVICES=1 ` + bin + ` --jail ` + jail + ` --driver-from ` + node + ` --gpus 2 -- /bin/true
`
	out, err = exec.Command("unshare", "--mount", "--propagation", "private", "--pid", "--fork", "/bin/sh", "-c", refused).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "NVIDIA_VISIBLE_DEVICES=1 names 1 GPUs (/dev/nvidia1), this pod asked for 2") {
		t.Fatalf("a pod given fewer GPUs than it asked for started: %v\n%s", err, out)
	}
}

func TestMultiarchLibDirIsDebians(t *testing.T) {
	for goarch, want := range map[string]string{"amd64": "/usr/lib/x86_64-linux-gnu", "arm64": "/usr/lib/aarch64-linux-gnu"} {
		if got := multiarchLibDir(goarch); got != want {
			t.Errorf("multiarchLibDir(%q) = %s, want %s", goarch, got, want)
		}
	}
	// The jail's library directory is one the driver's libraries are looked for in on the node.
	found := false
	for _, d := range driverLibDirs {
		found = found || d == JailLibDir
	}
	if !found {
		t.Errorf("JailLibDir %s is not among the node's driver library directories %v", JailLibDir, driverLibDirs)
	}
}
