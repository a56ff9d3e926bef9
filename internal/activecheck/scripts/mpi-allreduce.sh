# MPIAllReduce: a two-rank MPI all-reduce (mpi4py over PMIx) between this job's two nodes; the
# last line is the bus bandwidth, which the operator compares across the pairs.
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)
prog='
import array, os, time
from mpi4py import MPI
c = MPI.COMM_WORLD
n = int(os.environ.get("MSG_MIB", "16")) * (1 << 20) // 8
a = array.array("d", bytes(8 * n))
b = array.array("d", bytes(8 * n))
c.Allreduce(a, b)
c.Barrier()
t = time.perf_counter()
for _ in range(5):
    c.Allreduce(a, b)
t = c.allreduce(time.perf_counter() - t, op=MPI.MAX)
if c.rank == 0:
    print("bandwidth_mbs=%.1f" % (5 * 8 * n * 2 * (c.size - 1) / c.size / t / 1e6))
'
if ! out=$(srun --mpi=pmix --nodes=2 --ntasks-per-node=1 python3 -c "$prog" 2>&1); then
  printf '%s\n' "$out" | tail -n 3
  echo "the MPI all-reduce between $nodes failed"
  exit 1
fi
printf '%s\n' "$out" | grep '^bandwidth_mbs=' | tail -n 1
