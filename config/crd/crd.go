// Package crd holds the SlurmCluster CRD that make manifests generates, for the manager to keep
// the served CRD at its own revision (internal/crdupgrade).
package crd

import _ "embed"

// SlurmClusters is bases/slurm.hpc.dev_slurmclusters.yaml, as committed.
//
//go:embed bases/slurm.hpc.dev_slurmclusters.yaml
var SlurmClusters []byte
