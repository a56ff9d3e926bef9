package slurmharness

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// proc is a child process and the news of its end.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProc(cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// terminate sends SIGTERM, waits up to grace, then kills.
func (p *proc) terminate(ctx context.Context, grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	case <-ctx.Done():
	}
	p.kill()
}

func terminateAll(ps []*proc, grace time.Duration) {
	for _, p := range ps {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	// One deadline for all: a closed channel, so that every wait after the first to run out
	// ends too (time.After's channel delivers once, and the next process's wait would last
	// until that process ended by itself).
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, p := range ps {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
	}
	for _, p := range ps {
		p.kill()
	}
}

// childAttrs makes a child die with the test binary (SIGKILL when its parent thread ends;
// Go keeps its threads unless a locked goroutine exits, which this package never does) and
// keeps it out of the terminal's process group, so that ^C reaches only the test.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// hostEnv is the environment of every command and daemon in a host.
var hostEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"USER=root",
	"LANG=C.UTF-8",
}

func itoa(i int) string { return strconv.Itoa(i) }

// StartDaemon starts a long-running command on a host (for example slurmrestd); its output
// goes to the host's logs, and Stop ends it with the rest. name must be new on that host.
func (c *Cluster) StartDaemon(host, name string, args ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hosts[host]
	if !ok {
		return fmt.Errorf("slurmharness: no host %q", host)
	}
	// A daemon that stopped (StopDaemon, or on its own) may be started again.
	if p, dup := h.daemons[name]; dup && !p.exited() {
		return fmt.Errorf("slurmharness: %s already runs on %s", name, host)
	}
	return c.startDaemon(h, name, args...)
}
