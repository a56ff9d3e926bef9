package jailexec

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// IsSetUp says whether this mount namespace already has the jail set up (its /proc mounted):
// probes, hooks and `kubectl exec` run in the container's namespace and only need the chroot.
func IsSetUp(jail string) (bool, error) {
	return isMountpoint(filepath.Join(jail, "proc"))
}

func isMountpoint(p string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	want := filepath.Clean(p)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == want {
			return true, nil
		}
	}
	return false, s.Err()
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Setup makes the mounts. It is idempotent within one mount namespace.
func Setup(cfg Config, logf func(string, ...any)) error {
	return explainDenied(setup(cfg, logf), os.Geteuid() == 0)
}

// explainDenied says what a write refused to root in the jail most likely means: root is
// never denied access to a local file (mount failures are EPERM, a read-only file system
// EROFS), but a network file system that performs root's requests as another user (an NFS
// export with root_squash) answers EACCES.
func explainDenied(err error, root bool) error {
	if err == nil || !root || !errors.Is(err, unix.EACCES) {
		return err
	}
	return fmt.Errorf("%w: root may not write in the jail: most likely its file system performs root's requests as another user "+
		"(an NFS export with root_squash or all_squash does). Every pod makes the mountpoints and links the jail lacks "+
		"(Slurm's paths, sub-mounts, the GPU driver's libraries), so the jail's export needs no_root_squash "+
		"(or the file system's equivalent) for the nodes; see docs/install.md (storage)", err)
}

func setup(cfg Config, logf func(string, ...any)) error {
	if err := CheckPopulated(cfg.Jail); err != nil {
		return err
	}
	done, err := IsSetUp(cfg.Jail)
	if err != nil || done {
		return err
	}
	root := cfg.Root
	if root == "" {
		root = "/"
	}
	driverRoot := cfg.DriverRoot
	if driverRoot == "" {
		driverRoot = RunDriverDir
	}
	drv, err := FindDriver(root)
	if err != nil {
		return err
	}
	if len(drv.Files) > 0 {
		if err := gatherDriver(root, driverRoot, drv); err != nil {
			return fmt.Errorf("gather the GPU driver: %w", err)
		}
		logf("GPU driver: %d files bound under %s", len(drv.Files), RunDriverDir)
	}

	// The container's /proc is bound, not a new procfs mounted: the kernel refuses a new one in
	// a container whose /proc has masked paths (every unprivileged one), and the masks come
	// along with the bind. The pod's PID namespace is the same either way.
	if err := bind(cfg.Jail, Bind{Source: "/proc", Target: "/proc"}); err != nil {
		return err
	}
	for _, b := range append(DefaultBinds(), cfg.Binds...) {
		if err := bind(cfg.Jail, b); err != nil {
			return err
		}
		// The pod's GPUs, before anything is bound under /dev. A pod without GPUs in a cluster
		// whose gres.conf includes each node's file gets an empty one: slurmd stops on a
		// missing include.
		switch {
		case b.Target == "/dev" && cfg.GPUs > 0:
			if err := setupGPUs(cfg, logf); err != nil {
				return err
			}
		case b.Target == "/dev" && cfg.GresConf != "":
			if err := writeGresConf(cfg.GresConf, ""); err != nil {
				return err
			}
			logf("no GPUs in this pod: %s is empty", cfg.GresConf)
		}
	}
	if err := setupSlurm(cfg, logf); err != nil {
		return err
	}
	if len(drv.Files) > 0 {
		if err := linkDriver(cfg.Jail, root, drv, logf); err != nil {
			return fmt.Errorf("link the GPU driver into the jail: %w", err)
		}
	}
	return nil
}

// bind mounts b.Source (recursively) on its target in the jail, creating the mountpoint.
func bind(jail string, b Bind) error {
	fi, err := os.Stat(b.Source)
	if err != nil {
		return fmt.Errorf("bind %s: %w", b.Source, err)
	}
	target, err := resolveInJail(jail, b.Target)
	if err != nil {
		return err
	}
	if err := ensureMountpoint(target, fi.IsDir()); err != nil {
		return fmt.Errorf("bind %s on %s: %w", b.Source, b.Target, err)
	}
	if err := unix.Mount(b.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", b.Source, b.Target, err)
	}
	if b.ReadOnly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", b.Target, err)
		}
	}
	return nil
}

// ensureMountpoint makes a directory or an empty file to mount on.
func ensureMountpoint(p string, dir bool) error {
	fi, err := os.Stat(p)
	if err == nil {
		if fi.IsDir() != dir {
			return fmt.Errorf("%s exists and is not a %s", p, map[bool]string{true: "directory", false: "file"}[dir])
		}
		return nil
	}
	if !os.IsNotExist(err) {
		return err
	}
	if dir {
		return os.MkdirAll(p, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// gatherDriver binds each driver file into driverRoot/{lib,bin} (in the container's /run, so
// it is per pod) and remakes the links between them.
func gatherDriver(root, driverRoot string, d Driver) error {
	for _, sub := range []string{"lib", "bin"} {
		if err := os.MkdirAll(filepath.Join(driverRoot, sub), 0o755); err != nil {
			return err
		}
	}
	for _, f := range d.Files {
		dst := filepath.Join(driverRoot, "lib", f.Name)
		if f.Tool {
			dst = filepath.Join(driverRoot, "bin", f.Name)
		}
		if f.LinkTarget != "" {
			_ = os.Remove(dst)
			if err := os.Symlink(f.LinkTarget, dst); err != nil {
				return err
			}
			continue
		}
		if err := ensureMountpoint(dst, false); err != nil {
			return err
		}
		if err := unix.Mount(filepath.Join(root, f.Path), dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", f.Path, err)
		}
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", f.Path, err)
		}
	}
	for so, target := range d.sonameTargets(root) {
		dst := filepath.Join(driverRoot, "lib", so)
		_ = os.Remove(dst)
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
	}
	return nil
}

// JailLibDir is the jail's multiarch library directory, searched by its dynamic loader even for
// names missing from ld.so.cache: the one of this program's architecture, which is the node's and
// the jail's (a jail holds the programs of one architecture).
var JailLibDir = multiarchLibDir(runtime.GOARCH)

// multiarchLibDir is Debian's library directory for a Go architecture.
func multiarchLibDir(goarch string) string {
	switch goarch {
	case "arm64":
		return "/usr/lib/aarch64-linux-gnu"
	default:
		return "/usr/lib/x86_64-linux-gnu"
	}
}

// linkDriver makes, in the jail's library directory, a link for each soname to RunDriverDir,
// where this pod's files are. Links are made only where no file of that name exists; they are
// the same on every node (only the target's content differs), so nodes sharing the jail agree.
func linkDriver(jail, root string, d Driver, logf func(string, ...any)) error {
	libDir, err := resolveInJail(jail, JailLibDir)
	if err != nil {
		return err
	}
	names := append([]string(nil), d.Sonames...)
	for so := range d.sonameTargets(root) {
		names = append(names, so)
	}
	for _, so := range names {
		p := filepath.Join(libDir, so)
		want := filepath.Join(RunDriverDir, "lib", so)
		fi, err := os.Lstat(p)
		switch {
		case err == nil && fi.Mode()&os.ModeSymlink != 0:
			continue
		case err == nil:
			logf("warning: the jail has its own %s; the node's driver library is not used for it", filepath.Join(JailLibDir, so))
			continue
		}
		if err := os.Symlink(want, p); err != nil && !os.IsExist(err) {
			return err
		}
	}
	binDir, err := resolveInJail(jail, "/usr/bin")
	if err != nil {
		return err
	}
	for _, f := range d.Files {
		if !f.Tool {
			continue
		}
		p := filepath.Join(binDir, f.Name)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(RunDriverDir, "bin", f.Name), p); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

// Exec chroots into the jail and replaces this process with the command, looked up in the
// jail's PATH.
func Exec(jail string, argv []string, env []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("no command")
	}
	if err := unix.Chroot(jail); err != nil {
		return fmt.Errorf("chroot %s: %w", jail, err)
	}
	return execFromRoot(argv, env)
}

// execFromRoot replaces this process with the command, looked up in PATH, from the root.
func execFromRoot(argv []string, env []string) error {
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return err
	}
	return unix.Exec(path, argv, env)
}

// PivotExec is Exec in a mount namespace of the command's own whose root is the jail (pivot_root,
// not chroot), for daemons whose children must be able to make user namespaces: the kernel
// refuses them to a chrooted process, and rootless Podman in a job step needs them. The jail's
// mounts (Setup's binds, in the container's namespace) come along; mounts made in the jail
// later stay in it. RunPivoted calls it in a child, so that the container's first process, whose
// namespace probes, hooks and `kubectl exec` enter, stays in the container's (they chroot: Exec).
func PivotExec(jail string, argv []string, env []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("no command")
	}
	// The namespace is this thread's; execve makes it the process's.
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	// pivot_root refuses shared mounts; receive the container's later mounts, send none back.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make the mounts private: %w", err)
	}
	// The new root must be a mount point of its own.
	if err := unix.Mount(jail, jail, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind the jail on itself: %w", err)
	}
	if err := unix.Chdir(jail); err != nil {
		return err
	}
	if err := enterAsRoot(jail); err != nil {
		return err
	}
	// Shared within this namespace, as on a host: rootless Podman wants its mounts to propagate.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make the jail's mounts shared: %w", err)
	}
	return execFromRoot(argv, env)
}

// moveRootEnv, set to 1, makes enterAsRoot move the jail onto the root as it does where
// pivot_root is refused (tests use it to run that way where pivot_root works).
const moveRootEnv = "SLURM_JAIL_EXEC_MOVE_ROOT"

// enterAsRoot makes the jail (the current directory, a mount point) this mount namespace's root
// and the process's. pivot_root puts the old root on top of the jail, where it is detached. A
// container's default seccomp profile (RuntimeDefault, as on login pods) refuses pivot_root:
// there the jail is moved onto / (mount MS_MOVE) and the process chroots into it. The kernel
// then sees the namespace's root, following the mounts stacked on it, as the process's own,
// so the process does not count as chrooted and may still make user namespaces.
func enterAsRoot(jail string) error {
	var err error = unix.EPERM
	if os.Getenv(moveRootEnv) != "1" {
		err = unix.PivotRoot(".", ".")
	}
	switch {
	case err == nil:
		if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
			return fmt.Errorf("detach the container's root: %w", err)
		}
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS):
		if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s onto / (pivot_root is refused here): %w", jail, err)
		}
		if err := unix.Chroot("."); err != nil {
			return fmt.Errorf("chroot into the moved %s: %w", jail, err)
		}
	default:
		return fmt.Errorf("pivot_root into %s: %w", jail, err)
	}
	return unix.Chdir("/")
}

func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	pathVar := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			pathVar = strings.TrimPrefix(e, "PATH=")
		}
	}
	for _, dir := range filepath.SplitList(pathVar) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in the jail's PATH %s", name, pathVar)
}

// RunPivoted runs the command as PivotExec does, in a child: this process stays in the
// container's mount namespace as the container's first process, so that probes, hooks and
// `kubectl exec` (which enter the namespaces of that process) still find the entrypoint. It
// forwards signals to the child, reaps every orphan the pod's processes leave it, and returns
// the child's exit code (128 + the signal when it was killed). self is this program, started
// again with --pivot-child.
func RunPivoted(self string, jail string, argv []string, env []string) (int, error) {
	child := exec.Command(self, append([]string{"--jail", jail, "--pivot-child", "--"}, argv...)...)
	child.Env = env
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.SysProcAttr = &unix.SysProcAttr{Unshareflags: unix.CLONE_NEWNS}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2)
	if err := child.Start(); err != nil {
		return 127, err
	}
	pid := child.Process.Pid
	go func() {
		for s := range signals {
			_ = unix.Kill(pid, s.(unix.Signal))
		}
	}()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 127, err
		}
		if got != pid {
			continue // an orphan, reaped
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ws.ExitStatus(), nil
	}
}
