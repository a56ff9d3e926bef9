# NCCLAllReduce: nccl-tests' all_reduce_perf on every GPU of this job's two nodes (a rank per
# GPU, over PMIx); the last line is the average bus bandwidth, which the operator compares
# across the pairs.
command -v all_reduce_perf >/dev/null || { echo "all_reduce_perf (nccl-tests, built with MPI) is not in the jail"; exit 1; }
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)
if ! out=$(srun --mpi=pmix --nodes=2 --ntasks-per-node="$GPUS" --gpus-per-task=1 all_reduce_perf -b 256M -e 256M -g 1 -n 20 2>&1); then
  printf '%s\n' "$out" | tail -n 3
  echo "all_reduce_perf between $nodes failed"
  exit 1
fi
bw=$(printf '%s\n' "$out" | sed -n 's/.*Avg bus bandwidth *: *\([0-9.]*\).*/\1/p' | tail -n 1)
[ -n "$bw" ] || { printf '%s\n' "$out" | tail -n 2; echo "all_reduce_perf printed no bandwidth"; exit 1; }
# GB/s to MB/s.
echo "bandwidth_mbs=$(awk -v b="$bw" 'BEGIN {printf "%.1f", b * 1000}')"
