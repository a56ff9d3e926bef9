package slurm_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slurm-k8s/slurm-operator/internal/testutil/slurmtest"
)

// srun starts MPI ranks over PMIx on two nodes, by default (MpiDefault=pmix) and asked for,
// without mpirun: each rank knows its rank and the world, and they talk across the nodes.
func TestMPIOverPMIxAcrossTwoNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r := render(t, spec(t, 2))
	if !strings.Contains(string(r.files["slurm.conf"])+string(r.files["slurm-base.conf"]), "MpiDefault=pmix") {
		t.Fatal("the rendered slurm.conf does not default to PMIx")
	}
	c := startCluster(t, ctx, r, 2)
	if err := os.WriteFile(filepath.Join(c.SharedDir(), "mpi_hello.py"), []byte(slurmtest.MPIHello), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"srun", "--mpi=pmix", "-N2", "--ntasks-per-node=1", "python3", "/shared/mpi_hello.py"},
		{"srun", "-N2", "--ntasks-per-node=1", "python3", "/shared/mpi_hello.py"},
	} {
		out := login(t, ctx, c, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(lines)
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "0 2 1 demo-worker-") || !strings.HasPrefix(lines[1], "1 2 1 demo-worker-") ||
			strings.Fields(lines[0])[3] == strings.Fields(lines[1])[3] {
			t.Errorf("%s:\n%s\nwant ranks 0 and 1 of 2 on two workers, each with the sum 1", strings.Join(args, " "), out)
		}
	}
	if out := login(t, ctx, c, "srun", "--mpi=list"); !strings.Contains(out, "pmix") {
		t.Errorf("srun --mpi=list:\n%s", out)
	}
}
