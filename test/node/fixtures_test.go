package node

// trainPy stands in for the document's minGPT training (2.2): a CPU-only training loop, one
// process per node started by srun, each reporting its rank and its loss as it learns.
const trainPy = `import os, random, socket

rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
print(f"rank {rank} of {world} on {socket.gethostname()}", flush=True)
random.seed(rank)
data = [(x / 100.0, 3.0 * x / 100.0 + 0.5) for x in range(100)]
w, b = 0.0, 0.0
for epoch in range(200):
    gw = gb = 0.0
    for x, y in data:
        err = w * x + b - y
        gw += 2 * err * x / len(data)
        gb += 2 * err / len(data)
    w, b = w - 0.5 * gw, b - 0.5 * gb
loss = sum((w * x + b - y) ** 2 for x, y in data) / len(data)
print(f"rank {rank}: done, loss {loss:.6f}, w {w:.3f}, b {b:.3f}", flush=True)
`

// sbatchRun is the document's mingpt/slurm/sbatch_run.sh, with the path to main.py set.
func sbatchRun(dir string) string {
	return `#!/bin/bash
#SBATCH --job-name=mingpt
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --output=log.out
srun python3 ` + dir + `/mingpt/main.py
`
}
