package slurmharness

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dial opens a TCP connection from inside a host's network namespace to address (for example
// "demo-controller-0:6817" or "10.213.47.10:6817"; names are looked up in the cluster's
// hosts file), so that a test reaches a daemon's port as the host's neighbours do. The
// connection is made on a thread that enters the namespace and is thrown away afterwards;
// the socket keeps the namespace it was made in.
func (c *Cluster) Dial(ctx context.Context, host, address string) (net.Conn, error) {
	c.mu.Lock()
	h, ok := c.hosts[host]
	var pid int
	if ok && h.pause != nil && !h.pause.exited() {
		pid = h.pause.cmd.Process.Pid
	}
	c.mu.Unlock()
	if pid == 0 {
		return nil, fmt.Errorf("slurmharness: no running host %q", host)
	}
	hostName, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if net.ParseIP(hostName) == nil {
		c.mu.Lock()
		addr, known := c.addrs[hostName]
		if !known {
			for name, hh := range c.hosts {
				for _, a := range hh.Aliases {
					if a == hostName {
						addr, known = c.addrs[name], true
					}
				}
			}
		}
		c.mu.Unlock()
		if !known {
			return nil, fmt.Errorf("slurmharness: no host or alias %q", hostName)
		}
		hostName = addr
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// This thread ends in the host's namespace: it is never unlocked, so the runtime
		// retires it when the goroutine returns.
		runtime.LockOSThread()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("slurmharness: enter the network of %s: %w", host, err)}
			return
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(hostName, port))
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}
