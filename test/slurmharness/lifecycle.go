package slurmharness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// AddWorker adds a worker host with munged and slurmd, as Start does. It does not wait for the
// node to register: call UpdateSlurmFiles and `scontrol reconfigure` around it as the test
// needs.
func (c *Cluster) AddWorker(ctx context.Context, hs Host) error {
	if err := checkHostName(hs.Name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("slurmharness: cluster is stopped")
	}
	if _, ok := c.hosts[hs.Name]; ok {
		return fmt.Errorf("slurmharness: host %q exists", hs.Name)
	}
	h, err := c.addHost(ctx, hs, roleWorker)
	if err != nil {
		return err
	}
	if err := c.startMunged(ctx, h); err != nil {
		return err
	}
	return c.startSlurmd(h)
}

// StopWorker stops slurmd and every other process of a worker, and removes the host. Its logs
// stay in the cluster folder. A worker of the same name can be added again later.
func (c *Cluster) StopWorker(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hosts[name]
	if !ok {
		return fmt.Errorf("slurmharness: no host %q", name)
	}
	if h.role != roleWorker {
		return fmt.Errorf("slurmharness: host %q is not a worker", name)
	}
	if p := h.daemons[Slurmd]; p != nil {
		p.terminate(ctx, 10*time.Second)
	}
	err := c.removeHost(h)
	delete(c.hosts, name)
	for i, n := range c.order {
		if n == name {
			c.order = append(c.order[:i:i], c.order[i+1:]...)
			break
		}
	}
	old := h.dir + "~1"
	for i := 2; ; i++ {
		if _, serr := os.Lstat(old); serr != nil {
			break
		}
		old = fmt.Sprintf("%s~%d", h.dir, i)
	}
	if rerr := os.Rename(h.dir, old); rerr != nil {
		return errors.Join(err, rerr)
	}
	c.retired[name] = old
	return err
}

// MoveWorker stops a worker and starts it again under the same name at a new address, as
// Kubernetes replaces a pod: the shared hosts file names the new address from then on, so a
// fresh lookup finds it, while a daemon that resolved the name before keeps the old one.
func (c *Cluster) MoveWorker(ctx context.Context, hs Host) error {
	if err := c.StopWorker(ctx, hs.Name); err != nil {
		return err
	}
	c.mu.Lock()
	n := firstAddr + len(c.addrs) + c.moved
	if n > 250 {
		c.mu.Unlock()
		return errors.New("slurmharness: out of addresses")
	}
	c.moved++
	addr := fmt.Sprintf("%s.%d", subnet, n)
	c.addrs[hs.Name] = addr
	err := c.rewriteHosts(hs.Name, addr)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.AddWorker(ctx, hs)
}

// Addr is a host's address on the cluster's network ("" for a host it never had).
func (c *Cluster) Addr(host string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[host]
}

// rewriteHosts gives name a new address in the shared /etc/hosts, in place (same inode: the
// file is bind-mounted into every host).
func (c *Cluster) rewriteHosts(name, addr string) error {
	path := filepath.Join(c.dir, "etc/hosts")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && f[1] == name {
			lines[i] = addr + "\t" + strings.Join(f[1:], " ")
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// StopDaemon stops a daemon of a host (SIGTERM, then SIGKILL after grace), as a pod's
// container is stopped; the host and its other daemons stay.
func (c *Cluster) StopDaemon(ctx context.Context, host, daemon string, grace time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hosts[host]
	if !ok {
		return fmt.Errorf("slurmharness: no host %q", host)
	}
	p := h.daemons[daemon]
	if p == nil {
		return fmt.Errorf("slurmharness: no %s on %s", daemon, host)
	}
	p.terminate(ctx, grace)
	return nil
}

// PID is the process id of a daemon (Munged, Slurmctld, Slurmd, Slurmdbd, Mariadbd) on a host,
// or 0 when it is not running. slurmctld and slurmd keep their PID over `scontrol reconfigure`.
func (c *Cluster) PID(host, daemon string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.hosts[host]
	if !ok {
		return 0
	}
	p := h.daemons[daemon]
	if p == nil || p.exited() {
		return 0
	}
	return p.cmd.Process.Pid
}

// ReplaceHost stops every process of a host and starts the host again under the same name and
// address from rootFS (empty: the root file system it ran), as Kubernetes replaces a pod with
// one of a new image. Its daemons get SIGTERM first and grace to save their state. What a pod
// keeps on its volumes stays: /var/spool (slurmctld's StateSaveLocation, slurmd's spool),
// /var/lib/mysql and /var/log/slurm; everything else the host wrote is gone. The host's
// daemons are started again as Start starts them (munged; MariaDB and slurmdbd on the
// accounting host; slurmctld on a controller; slurmd on a worker), and ReplaceHost returns
// once they answer; a worker's slurmd must also have registered with the primary controller
// when that one runs.
func (c *Cluster) ReplaceHost(ctx context.Context, name, rootFS string, grace time.Duration) error {
	if rootFS != "" {
		if err := checkRootFS(rootFS); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("slurmharness: cluster is stopped")
	}
	old, ok := c.hosts[name]
	if !ok {
		return fmt.Errorf("slurmharness: no host %q", name)
	}
	// The daemons that write state first, munged last: they may need it while they stop.
	for _, d := range []string{Slurmdbd, Slurmctld, Slurmd, Mariadbd, Munged} {
		if p := old.daemons[d]; p != nil {
			p.terminate(ctx, grace)
		}
	}
	err := c.removeHost(old)
	// The overlay's upper folder belongs to the old root file system; the new host starts
	// from a clean one, like a new container.
	for _, d := range []string{"upper", "work", "ready"} {
		err = errors.Join(err, os.RemoveAll(filepath.Join(old.dir, d)))
	}
	if err != nil {
		return err
	}
	hs := old.Host
	if rootFS != "" {
		hs.RootFS = rootFS
	}
	delete(c.hosts, name)
	h, err := c.addHost(ctx, hs, old.role)
	// addHost appended the name to c.order, where it already was.
	c.order = c.order[:len(c.order)-1]
	if err != nil {
		return err
	}
	if err := c.startMunged(ctx, h); err != nil {
		return err
	}
	isCtrl := h.role == roleController
	isAcct := c.cfg.Accounting != nil && c.cfg.Accounting.Name == name
	if isCtrl || isAcct {
		if err := c.writeJWTKeys(ctx, h); err != nil {
			return err
		}
	}
	if isAcct {
		if err := c.startAccounting(ctx, h); err != nil {
			return err
		}
	}
	if isCtrl {
		return c.startSlurmctld(ctx, h)
	}
	if h.role != roleWorker {
		return nil
	}
	if err := c.startSlurmd(h); err != nil {
		return err
	}
	if ctrl := c.hosts[c.cfg.Controller.Name]; ctrl != nil && ctrl.daemons[Slurmctld] != nil && !ctrl.daemons[Slurmctld].exited() {
		return c.waitRegistered(ctx, ctrl, h)
	}
	return nil
}
