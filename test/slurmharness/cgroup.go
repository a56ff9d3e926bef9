package slurmharness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const cgroupRoot = "/sys/fs/cgroup"

// hierarchy is one cgroup hierarchy mounted under /sys/fs/cgroup on this machine (v1
// controllers, named v1 hierarchies, or the v2 one).
type hierarchy struct {
	name    string // mount point below /sys/fs/cgroup, e.g. "memory"
	fstype  string // "cgroup" or "cgroup2"
	options string // -o for a fresh mount of the same v1 hierarchy, e.g. "cpu,cpuacct"
	base    string // this process's own cgroup in it: our cgroups go below
}

// findHierarchies reads the cgroup mounts and this process's cgroups.
func findHierarchies() ([]hierarchy, error) {
	own := map[string]string{} // sorted controller list ("" for v2) -> path
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 {
			own[sortedList(strings.Split(f[1], ","))] = f[2]
		}
	}
	if data, err = os.ReadFile("/proc/self/mountinfo"); err != nil {
		return nil, err
	}
	var hs []hierarchy
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		left, right, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		lf, rf := strings.Fields(left), strings.Fields(right)
		if len(lf) < 5 || len(rf) < 3 || filepath.Dir(lf[4]) != cgroupRoot {
			continue
		}
		h := hierarchy{name: filepath.Base(lf[4]), fstype: rf[0]}
		var ctrls []string
		switch rf[0] {
		case "cgroup2":
		case "cgroup":
			for _, o := range strings.Split(rf[2], ",") {
				switch {
				case o == "rw", o == "ro", o == "xattr", o == "noprefix", o == "clone_children",
					o == "cpuset_v2_mode", o == "favordynmods", strings.HasPrefix(o, "release_agent="):
				default:
					ctrls = append(ctrls, o)
				}
			}
			if len(ctrls) == 0 {
				continue
			}
			h.options = strings.Join(ctrls, ",")
			if allNamed(ctrls) {
				h.options = "none," + h.options
			}
		default:
			continue
		}
		key := sortedList(ctrls)
		path, ok := own[key]
		if !ok || seen[key] {
			continue
		}
		root := lf[3]
		if root != "/" {
			if path != root && !strings.HasPrefix(path, root+"/") {
				continue
			}
			path = strings.TrimPrefix(path, root)
		}
		seen[key] = true
		h.base = filepath.Join(lf[4], path)
		hs = append(hs, h)
	}
	for _, h := range hs {
		if h.name == "freezer" {
			return hs, nil
		}
	}
	return nil, errors.New("no cgroup v1 freezer hierarchy under /sys/fs/cgroup: the harness needs cgroup v1 (or hybrid); pure cgroup v2 is not supported yet")
}

func allNamed(ctrls []string) bool {
	for _, c := range ctrls {
		if !strings.HasPrefix(c, "name=") {
			return false
		}
	}
	return true
}

func sortedList(l []string) string {
	var out []string
	for _, s := range l {
		if s != "" {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// cgroupLinks lists the symbolic links of /sys/fs/cgroup (such as cpu -> cpu,cpuacct) as
// (name, target) pairs, to copy into each host's /sys/fs/cgroup.
func cgroupLinks() [][2]string {
	entries, _ := os.ReadDir(cgroupRoot)
	var links [][2]string
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			if t, err := os.Readlink(filepath.Join(cgroupRoot, e.Name())); err == nil {
				links = append(links, [2]string{e.Name(), t})
			}
		}
	}
	return links
}

// makeCgroup creates dir (and its parents) below h.base. New cpuset cgroups get their
// parent's cpus and mems, without which no task can join them.
func makeCgroup(h hierarchy, dir string) error {
	rel, err := filepath.Rel(h.base, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is not below %s", dir, h.base)
	}
	cur := h.base
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, part)
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems", "cpus", "mems"} {
			if !strings.Contains(h.options, "cpuset") {
				break
			}
			v, err := os.ReadFile(filepath.Join(cur, f))
			if err != nil || strings.TrimSpace(string(v)) != "" {
				continue
			}
			pv, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(cur, f), pv, 0); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(cur, f), err)
			}
		}
	}
	return nil
}

// procsInCgroups lists the processes in the cgroup folders and their descendants.
func procsInCgroups(dirs []string) []int {
	var pids []int
	seen := map[int]bool{}
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// procsInNetns lists the processes whose network namespace has one of the inodes.
func procsInNetns(inodes map[uint64]bool) []int {
	delete(inodes, 0)
	if len(inodes) == 0 {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name()+"/ns/net", &st) == nil && inodes[st.Ino] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killCgroupTree kills every process below dir and removes the cgroups.
func killCgroupTree(dir string) error {
	for i := 0; i < 50; i++ {
		pids := procsInCgroups([]string{dir})
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return removeCgroupTree(dir)
}

// removeCgroupTree removes a cgroup folder and its descendants, deepest first. A cgroup
// stays busy for a moment after its last task died, so it retries for a few seconds.
func removeCgroupTree(dir string) error {
	var err error
	for i := 0; i < 50; i++ {
		var dirs []string
		werr := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		if werr != nil || len(dirs) == 0 {
			return nil
		}
		err = nil
		for j := len(dirs) - 1; j >= 0; j-- { // WalkDir is lexical: children follow parents
			if rerr := syscall.Rmdir(dirs[j]); rerr != nil && !errors.Is(rerr, syscall.ENOENT) {
				err = fmt.Errorf("rmdir %s: %w", dirs[j], rerr)
			}
		}
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("slurmharness: %w", err)
}

// mountedUnder reports a mount point at or below dir in this mount namespace.
func mountedUnder(dir string) (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			return f[4], nil
		}
	}
	return "", nil
}

// removeDir removes the cluster folder, unless something is mounted in it (all our mounts
// live in the hosts' private mount namespaces, so this is only a safety net).
func removeDir(dir string) error {
	m, err := mountedUnder(dir)
	if err != nil {
		return err
	}
	if m != "" {
		return fmt.Errorf("slurmharness: %s is mounted, not removing %s", m, dir)
	}
	return os.RemoveAll(dir)
}

const keptMarker = "KEPT"

// sweepStale removes what test processes that died without Stop left behind: their
// processes (in our cgroups), cgroups and temporary folders. Names carry the PID of the test
// process; anything of a live process, or kept with SLURMHARNESS_KEEP, is left alone.
func sweepStale(hs []hierarchy) {
	dead := func(name string) bool {
		rest, ok := strings.CutPrefix(name, tmpPrefix)
		if !ok {
			return false
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			return false
		}
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	for _, h := range hs {
		entries, _ := os.ReadDir(h.base)
		for _, e := range entries {
			if e.IsDir() && dead(e.Name()) {
				_ = killCgroupTree(filepath.Join(h.base, e.Name()))
			}
		}
	}
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		d := filepath.Join(os.TempDir(), e.Name())
		if !e.IsDir() || !dead(e.Name()) {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, keptMarker)); err == nil {
			continue
		}
		_ = removeDir(d)
	}
}

// watchdogScript runs outside the cluster, as a child of the test process that gets SIGTERM
// when the test process dies (Pdeathsig). Daemons that switch to SlurmUser lose their own
// Pdeathsig, and job steps never had one, but all of them live in the cluster's cgroups:
// the watchdog kills what is there, removes the cgroups and the temporary folder, and exits.
// Stop kills it with SIGKILL, which skips all this.
const watchdogScript = `
keep=$1 dir=$2; shift 2
case $dir in /*/slurmharness-*) ;; *) exit 1 ;; esac
[ $# -gt 0 ] || exit 1
cleanup() {
	[ $# -gt 0 ] || exit 0
	# Pdeathsig comes again each time one of the dead process's threads exits: ignore it now.
	trap '' TERM INT HUP
	[ -z "${sleeper:-}" ] || kill "$sleeper" 2>/dev/null
	i=0
	while [ $i -lt 50 ]; do
		pids=$(find "$@" -name cgroup.procs -exec cat {} + 2>/dev/null)
		[ -n "$pids" ] || break
		kill -9 $pids 2>/dev/null
		sleep 0.1; i=$((i+1))
	done
	i=0
	while [ $i -lt 50 ]; do
		find "$@" -depth -type d -exec rmdir {} + 2>/dev/null && break
		sleep 0.1; i=$((i+1))
	done
	if [ -z "$keep" ] && ! awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
		rm -rf "$dir"
	fi
	exit 0
}
trap 'cleanup "$@"' TERM INT HUP
while :; do sleep 3600 & sleeper=$!; wait $sleeper; done
`

// startWatchdog creates the cluster's cgroup folders and starts the watchdog over them.
func (c *Cluster) startWatchdog() error {
	args := []string{"-c", watchdogScript, "slurmharness-watchdog", os.Getenv(KeepEnv), c.dir}
	for _, h := range c.hierarchy {
		d := filepath.Join(h.base, c.id)
		if err := makeCgroup(h, d); err != nil {
			return fmt.Errorf("slurmharness: cgroup %s: %w", d, err)
		}
		args = append(args, d)
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = hostEnv
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	p, err := startProc(cmd)
	if err != nil {
		return fmt.Errorf("slurmharness: watchdog: %w", err)
	}
	c.watchdog = p
	return nil
}
