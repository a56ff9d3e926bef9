package node

import (
	"fmt"
	"strings"
)

// storageManifests are what the admin creates before installing (2.1, step 2, and 4.4, step 1):
// the claims jail-pvc, controller-spool-pvc and jail-submount-mlperf-sd-pvc, on static volumes
// of the node (storage class node-local, pinned to their claims), the volumes the workers'
// spool claims bind to, and the external accounting database with its password Secret.
func storageManifests() string {
	var b strings.Builder
	volume := func(name, size, mode, claim string) {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s-%[2]s}
spec:
  capacity: {storage: %[3]s}
  accessModes: [%[4]s]
  storageClassName: node-local
  claimRef: {namespace: %[1]s, name: %[5]s}
  hostPath: {path: /tmp/slurm-operator-node/volumes/%[2]s, type: DirectoryOrCreate}
`, ns, name, size, mode, claim)
	}
	claim := func(name, size string) {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %s, namespace: %s}
spec:
  storageClassName: node-local
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: %s}}
`, name, ns, size)
	}
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns)
	volume("jail", "20Gi", "ReadWriteMany", "jail-pvc")
	volume("controller-spool", "1Gi", "ReadWriteMany", "controller-spool-pvc")
	volume("mlperf-sd", "1Gi", "ReadWriteMany", "jail-submount-mlperf-sd-pvc")
	for i := 0; i < 3; i++ {
		volume(fmt.Sprintf("worker-spool-%d", i), "1Gi", "ReadWriteOnce", fmt.Sprintf("spool-%s-worker-%d", cluster, i))
	}
	claim("jail-pvc", "20Gi")
	claim("controller-spool-pvc", "1Gi")
	claim("jail-submount-mlperf-sd-pvc", "1Gi")
	fmt.Fprintf(&b, `---
apiVersion: v1
kind: Secret
metadata: {name: slurm-db, namespace: %[1]s, labels: {slurm.hpc.dev/allow-reference: "true"}}
stringData: {password: node-test-password}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: mariadb, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: mariadb}}
  template:
    metadata: {labels: {app: mariadb}}
    spec:
      containers:
        - name: mariadb
          image: slurm-k8s-test/mariadb:11
          imagePullPolicy: Never
          env:
            - {name: MARIADB_DATABASE, value: slurm_acct_db}
            - {name: MARIADB_USER, value: slurm}
            - name: MARIADB_PASSWORD
              valueFrom: {secretKeyRef: {name: slurm-db, key: password}}
          ports: [{containerPort: 3306, name: mysql}]
          readinessProbe: {tcpSocket: {port: mysql}, periodSeconds: 2}
          resources: {requests: {cpu: 50m, memory: 128Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: mariadb, namespace: %[1]s}
spec:
  selector: {app: mariadb}
  ports: [{port: 3306, targetPort: mysql}]
`, ns)
	return b.String()
}

// standInNvidiaSMI stands in for nvidia-smi on a node without NVIDIA GPUs. In a job it lists
// the GPUs Slurm gave it (CUDA_VISIBLE_DEVICES); otherwise (the health check) as many as
// /etc/stand-in-gpus/<host> says, one by default. With none, plain nvidia-smi fails.
const standInNvidiaSMI = `#!/bin/sh
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  ids=$(echo "$CUDA_VISIBLE_DEVICES" | tr , ' ')
else
  n=$(cat /etc/stand-in-gpus/$(hostname) 2>/dev/null || echo 1)
  ids=$(seq 0 $((n - 1)))
fi
if [ "${1:-}" = -L ]; then
  for i in $ids; do echo "GPU $i: Stand-In GPU (UUID: GPU-$(hostname)-$i)"; done
  exit 0
fi
[ -n "$ids" ] || { echo "No devices were found" >&2; exit 6; }
echo "stand-in nvidia-smi: $(echo $ids | wc -w) GPUs"
`

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
