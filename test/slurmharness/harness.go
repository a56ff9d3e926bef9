package slurmharness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Daemon names, for PID.
const (
	Munged    = "munged"
	Slurmctld = "slurmctld"
	Slurmd    = "slurmd"
	Slurmdbd  = "slurmdbd"
	Mariadbd  = "mariadbd"
)

// KeepEnv names the environment variable that, when set to a non-empty value, makes Stop
// keep the cluster's temporary folder (configs, logs, spool, overlays) for a post-mortem.
// Processes, namespaces and cgroups are removed all the same.
const KeepEnv = "SLURMHARNESS_KEEP"

const (
	subnet         = "10.213.47" // a /24 inside a bridge of our own: it never meets the host's routes
	firstAddr      = 10
	defaultTimeout = 2 * time.Minute
	tmpPrefix      = "slurmharness-"
)

// Cluster is a running test cluster. Stop it when done.
type Cluster struct {
	cfg       Config
	dir       string // temporary folder: everything the cluster writes
	id        string // base name of dir; also the name of our cgroup folders
	nsenter   string
	slurmUID  int
	slurmGID  int
	hierarchy []hierarchy

	mu       sync.Mutex
	watchdog *proc
	bridge   *proc
	hosts    map[string]*host
	order    []string          // host names in start order
	addrs    map[string]string // host name -> address; kept after StopWorker for reuse
	moved    int               // addresses given up by MoveWorker, never handed out again
	retired  map[string]string // host name -> folder of a stopped worker, for Logs
	links    int               // veth pairs made so far: each gets a new name
	stopped  bool
}

// Start starts a cluster: a host per Host, munged everywhere, MariaDB and slurmdbd when
// Accounting is set, slurmctld, and slurmd on every worker. It returns once `scontrol ping`
// answers UP and every worker has registered. On error, it removes what it made.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := validate(&cfg); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("slurmharness: must run as root (namespaces, mounts, cgroups)")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("slurmharness: %w", err)
	}
	uid, gid, err := lookupUser(filepath.Join(cfg.RootFS, "etc/passwd"), "slurm")
	if err != nil {
		return nil, fmt.Errorf("slurmharness: user slurm in the root file system: %w", err)
	}
	hier, err := findHierarchies()
	if err != nil {
		return nil, fmt.Errorf("slurmharness: cgroups: %w", err)
	}
	sweepStale(hier)

	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", tmpPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("slurmharness: %w", err)
	}
	c := &Cluster{
		cfg: cfg, dir: dir, id: filepath.Base(dir), nsenter: nsenter,
		slurmUID: uid, slurmGID: gid, hierarchy: hier,
		hosts: map[string]*host{}, addrs: map[string]string{}, retired: map[string]string{},
	}
	if err := c.start(ctx); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = fmt.Errorf("%w (and stop: %v)", err, stopErr)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	if err := c.writeShared(); err != nil {
		return err
	}
	if err := c.startWatchdog(); err != nil {
		return err
	}
	if err := c.startBridge(ctx); err != nil {
		return err
	}
	// Hosts: the controller first, then the accounting host, logins and workers.
	c.mu.Lock()
	defer c.mu.Unlock()
	ctrl, err := c.addHost(ctx, c.cfg.Controller, roleController)
	if err != nil {
		return err
	}
	var backup *host
	if b := c.cfg.BackupController; b != nil {
		if backup, err = c.addHost(ctx, *b, roleController); err != nil {
			return err
		}
	}
	acct := ctrl
	if a := c.cfg.Accounting; a != nil && a.Name != ctrl.Name {
		if acct, err = c.addHost(ctx, *a, roleAccounting); err != nil {
			return err
		}
	}
	for _, h := range c.cfg.Logins {
		if _, err := c.addHost(ctx, h, roleLogin); err != nil {
			return err
		}
	}
	var workers []*host
	for _, h := range c.cfg.Workers {
		w, err := c.addHost(ctx, h, roleWorker)
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	for _, name := range c.order {
		if err := c.startMunged(ctx, c.hosts[name]); err != nil {
			return err
		}
	}
	jwtHosts := []*host{ctrl, acct}
	if backup != nil {
		jwtHosts = append(jwtHosts, backup)
	}
	if err := c.writeJWTKeys(ctx, jwtHosts...); err != nil {
		return err
	}
	if c.cfg.Accounting != nil {
		if err := c.startAccounting(ctx, acct); err != nil {
			return err
		}
	}
	if err := c.startSlurmctld(ctx, ctrl); err != nil {
		return err
	}
	if backup != nil {
		if err := c.startSlurmctld(ctx, backup); err != nil {
			return err
		}
	}
	for _, w := range workers {
		if err := c.startSlurmd(w); err != nil {
			return err
		}
	}
	for _, w := range workers {
		if err := c.waitRegistered(ctx, ctrl, w); err != nil {
			return err
		}
	}
	return nil
}

// writeShared writes the files every host sees: /etc/hosts, /etc/slurm, /etc/munge, /shared.
func (c *Cluster) writeShared() error {
	for _, d := range []string{"etc/slurm", "etc/munge", "shared", "hosts"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(c.dir, "shared"), 0o1777); err != nil {
		return err
	}
	if c.cfg.BackupController != nil {
		d := c.sharedState()
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.Chown(d, c.slurmUID, c.slurmGID); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(c.dir, "etc/munge"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dir, "etc/munge/munge.key"), c.cfg.MungeKey, 0o400); err != nil {
		return err
	}
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	if err := os.WriteFile(filepath.Join(c.dir, "etc/hosts"), []byte(hosts), 0o644); err != nil {
		return err
	}
	enter := fmt.Sprintf(`#!/bin/sh
# enter HOST [COMMAND...]: run a command (default: bash) in a host of this cluster.
[ -n "${1:-}" ] || { echo "usage: $0 HOST [COMMAND...]; hosts: $(ls %[1]s/hosts)" >&2; exit 2; }
pid=$(cat %[1]s/hosts/"$1"/pause.pid) || exit 1
shift
[ $# -gt 0 ] || set -- bash
exec nsenter -t "$pid" -n -m -u -C -r --wdns=/shared -- "$@"
`, shq(c.dir))
	if err := os.WriteFile(filepath.Join(c.dir, "enter"), []byte(enter), 0o755); err != nil {
		return err
	}
	if err := c.writeSlurmFiles(c.cfg.SlurmFiles); err != nil {
		return err
	}
	if c.cfg.Accounting != nil {
		p := filepath.Join(c.dir, "etc/slurm/slurmdbd.conf")
		if err := writeFileAtomic(p, c.cfg.SlurmdbdConf, 0o600, c.slurmUID, c.slurmGID); err != nil {
			return fmt.Errorf("slurmharness: slurmdbd.conf: %w", err)
		}
	}
	return nil
}

// UpdateSlurmFiles writes files of /etc/slurm, which every host sees. Files not named are
// left alone. Running daemons read them on `scontrol reconfigure`.
func (c *Cluster) UpdateSlurmFiles(files map[string][]byte) error {
	for name := range files {
		if err := checkFileName(name); err != nil {
			return err
		}
	}
	return c.writeSlurmFiles(files)
}

// Reconfigure runs `scontrol reconfigure` on host and returns once slurmctld has read its
// config again: `scontrol show config`'s "Configuration data as of" time has moved on. Slurm
// 24.11's slurmctld starts itself anew for a reconfigure and replies when the new process is
// up; on a loaded machine that can take longer than the client's MessageTimeout, which then
// says "Socket timed out on send/recv operation" although the reconfigure goes on. That answer
// alone is waited out; any other error is returned.
func (c *Cluster) Reconfigure(ctx context.Context, host string) error {
	before, err := c.configTime(ctx, host)
	if err != nil {
		return err
	}
	out, err := c.Exec(ctx, host, "scontrol", "reconfigure")
	if err != nil && !strings.Contains(out+err.Error(), "Socket timed out") {
		return fmt.Errorf("slurmharness: scontrol reconfigure on %s: %w", host, err)
	}
	return c.WaitFor(ctx, "slurmctld's config read again after the reconfigure", func() (bool, error) {
		now, err := c.configTime(ctx, host)
		return err == nil && now != before, err
	})
}

// configTime is the "Configuration data as of" line of `scontrol show config`: when slurmctld
// last read its config.
func (c *Cluster) configTime(ctx context.Context, host string) (string, error) {
	out, err := c.Exec(ctx, host, "scontrol", "show", "config")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Configuration data as of ") {
			return line, nil
		}
	}
	return "", fmt.Errorf("slurmharness: no \"Configuration data as of\" line in scontrol show config on %s", host)
}

func (c *Cluster) writeSlurmFiles(files map[string][]byte) error {
	for name, data := range files {
		mode, uid, gid := os.FileMode(0o644), 0, 0
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755 // a program, such as the health check (HealthCheckProgram)
		}
		if name == "slurmdbd.conf" {
			mode, uid, gid = 0o600, c.slurmUID, c.slurmGID
		}
		if err := writeFileAtomic(filepath.Join(c.dir, "etc/slurm", name), data, mode, uid, gid); err != nil {
			return fmt.Errorf("slurmharness: write %s: %w", name, err)
		}
	}
	return nil
}

// writeFileAtomic replaces path by a file with data, so that a daemon never reads half a file.
func writeFileAtomic(path string, data []byte, mode os.FileMode, uid, gid int) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), mode); err != nil {
		return err
	}
	if err := os.Chown(f.Name(), uid, gid); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Dir is the cluster's temporary folder (see the README for its layout).
func (c *Cluster) Dir() string { return c.dir }

// SharedDir is the host path of /shared, a folder every host sees. Exec runs commands there,
// so the output files of sbatch jobs land in it.
func (c *Cluster) SharedDir() string { return filepath.Join(c.dir, "shared") }

// Exec runs a command on a host, inside its namespaces and root, with /shared as working
// directory and a clean environment. The error includes the exit status and stderr.
func (c *Cluster) Exec(ctx context.Context, host string, args ...string) (string, error) {
	c.mu.Lock()
	h, ok := c.hosts[host]
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return "", errors.New("slurmharness: cluster is stopped")
	}
	if !ok {
		return "", fmt.Errorf("slurmharness: no host %q", host)
	}
	return c.run(ctx, h, nil, args...)
}

func (c *Cluster) run(ctx context.Context, h *host, stdin []byte, args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("slurmharness: no command")
	}
	cmd := c.hostCommand(ctx, h, "/shared", args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s on %s: %w: %s", strings.Join(args, " "), h.Name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// WaitFor calls cond every 200 ms until it returns true. An error from cond counts as "not
// yet" and is reported if the wait times out, unless it is Permanent, which ends the wait. The timeout is ctx's deadline, or two minutes
// when ctx has none.
func (c *Cluster) WaitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	return waitFor(ctx, what, cond)
}

func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
	}
	start := time.Now()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		var p *permanentError
		if errors.As(err, &p) {
			return fmt.Errorf("slurmharness: waiting for %s: %w", what, p.err)
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("slurmharness: waiting for %s: gave up after %s: %w (last error: %w)", what, time.Since(start).Round(time.Millisecond), ctx.Err(), last)
			}
			return fmt.Errorf("slurmharness: waiting for %s: gave up after %s: %w", what, time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// permanentError ends a wait at once.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }

// Permanent wraps an error that a WaitFor condition returns to end the wait at once (a job
// that ended in another state will not reach the one awaited).
func Permanent(err error) error { return permanent(err) }

// Logs returns the last lines of every log of a host: the daemons' own log files
// (/var/log/slurm) and their stdout/stderr, for failure messages.
func (c *Cluster) Logs(host string) string {
	c.mu.Lock()
	dir := filepath.Join(c.dir, "hosts", host)
	if h, ok := c.hosts[host]; ok {
		dir = h.dir
	} else if old, ok := c.retired[host]; ok {
		dir = old
	}
	c.mu.Unlock()
	return logTails(dir, 60)
}

func logTails(hostDir string, lines int) string {
	var files []string
	for _, pattern := range []string{"setup.log", "out/*", "log/*"} {
		m, _ := filepath.Glob(filepath.Join(hostDir, pattern))
		files = append(files, m...)
	}
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			continue
		}
		all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(all) > lines {
			all = all[len(all)-lines:]
		}
		rel, _ := filepath.Rel(hostDir, f)
		fmt.Fprintf(&b, "----- %s: %s (last %d lines)\n%s\n", filepath.Base(hostDir), rel, len(all), strings.Join(all, "\n"))
	}
	return b.String()
}

// Hosts lists the running hosts in start order.
func (c *Cluster) Hosts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

// Stop kills every process of the cluster and removes its namespaces, cgroups and temporary
// folder (kept when SLURMHARNESS_KEEP is set). It is safe to call more than once, and after
// a failed Start.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	var errs []error
	// Ask the daemons to stop, Slurm's first and then those they use (MariaDB, munged), so
	// that kept logs end cleanly; then kill whatever is left (job steps included).
	for _, phase := range [][]string{{Slurmd, Slurmctld, Slurmdbd}, {Mariadbd, Munged}} {
		var ps []*proc
		for _, name := range c.order {
			for _, d := range phase {
				if p := c.hosts[name].daemons[d]; p != nil {
					ps = append(ps, p)
				}
			}
		}
		terminateAll(ps, 3*time.Second)
	}
	for _, name := range c.order {
		if err := c.removeHost(c.hosts[name]); err != nil {
			errs = append(errs, err)
		}
	}
	if c.bridge != nil {
		c.bridge.kill()
	}
	for _, h := range c.hierarchy {
		if err := removeCgroupTree(filepath.Join(h.base, c.id)); err != nil {
			errs = append(errs, err)
		}
	}
	if c.watchdog != nil {
		// Its sleeper too (the watchdog leads a process group of its own): SIGKILL skips the
		// watchdog's clean-up, which would have ended it, and it lived on for an hour.
		if !c.watchdog.exited() {
			_ = syscall.Kill(-c.watchdog.cmd.Process.Pid, syscall.SIGKILL)
		}
		c.watchdog.kill()
	}
	if os.Getenv(KeepEnv) == "" {
		if err := removeDir(c.dir); err != nil {
			errs = append(errs, err)
		}
	} else {
		_ = os.WriteFile(filepath.Join(c.dir, keptMarker), nil, 0o644)
		fmt.Fprintf(os.Stderr, "slurmharness: %s is set: kept %s\n", KeepEnv, c.dir)
	}
	return errors.Join(errs...)
}
