// Package slurmtest runs the controller pod's Slurm sidecars (slurmrestd, the reconfigure
// script) on a test cluster of test/slurmharness, exactly as the operator renders them, and
// returns the operator's Slurm client for it. It is for tests only.
package slurmtest

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	slurmv1alpha1 "github.com/slurm-k8s/slurm-operator/api/v1alpha1"
	"github.com/slurm-k8s/slurm-operator/internal/render/slurmctld"
	"github.com/slurm-k8s/slurm-operator/internal/slurm"
	"github.com/slurm-k8s/slurm-operator/test/slurmharness"
)

// StartRestd starts slurmrestd on host with the controller pod's authentication and plugins,
// listening on a unix socket in the cluster's shared folder (the test process cannot reach the
// hosts' network), and returns a client of the operator's that talks to it with key.
func StartRestd(ctx context.Context, c *slurmharness.Cluster, host string, sc *slurmv1alpha1.SlurmCluster, key []byte) (*slurm.Client, error) {
	if _, err := c.Exec(ctx, host, "sh", "-c", "mkdir -p /shared/restd && chmod 1777 /shared/restd"); err != nil {
		return nil, err
	}
	args := slurmctld.RestdArgs(sc)
	argv := []string{"/usr/bin/env"}
	for _, e := range slurmctld.RestdEnv() {
		// The harness runs slurmrestd as nobody itself; its container's seccomp profile is not here.
		if e.Name != "SLURMRESTD_SECURITY" {
			argv = append(argv, e.Name+"="+e.Value)
		}
	}
	// nobody and nogroup by number: slurmrestd 26.05 does not resolve the name "nobody"
	// ("fatal: Unable to resolve user: nobody"), 24.11 takes either.
	argv = append(append(argv, "/usr/sbin/slurmrestd", "-u", "65534", "-g", "65534"), args[:len(args)-1]...)
	argv = append(argv, "unix:/shared/restd/slurmrestd.sock")
	if err := c.StartDaemon(host, "slurmrestd", argv...); err != nil {
		return nil, err
	}
	sock := filepath.Join(c.SharedDir(), "restd", "slurmrestd.sock")
	cl := slurm.NewClient("http://slurmrestd", key)
	cl.HTTP = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	err := c.WaitFor(ctx, "slurmrestd answers", func() (bool, error) {
		_, err := cl.Nodes(ctx)
		return err == nil, nil
	})
	return cl, err
}

// StartReconfigureSidecar runs the controller pod's reconfigure script on host, and returns
// once it has taken its first look at the files (changes from then on are noticed).
func StartReconfigureSidecar(ctx context.Context, c *slurmharness.Cluster, host string) error {
	if err := c.StartDaemon(host, "reconfigure", "/bin/sh", "-c", slurmctld.ReconfigureScript); err != nil {
		return err
	}
	return c.WaitFor(ctx, "the reconfigure sidecar watches", func() (bool, error) {
		return strings.Contains(c.Logs(host), "watching /etc/slurm for changes"), nil
	})
}

// MPIHello is a two-rank MPI program (mpi4py on Debian's Open MPI, started by srun over PMIx):
// each rank prints its rank, the world size, the sum of all ranks (an allreduce across the
// nodes) and its host name: "0 2 1 HOST" and "1 2 1 HOST".
const MPIHello = `from mpi4py import MPI
import socket
c = MPI.COMM_WORLD
print(c.Get_rank(), c.Get_size(), c.allreduce(c.Get_rank()), socket.gethostname(), flush=True)`
