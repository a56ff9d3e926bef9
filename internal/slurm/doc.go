// Package slurm is the operator's client for slurmctld, through slurmrestd's REST API
// (data parser v0.0.42, Slurm 24.11) with HS256 JWTs signed by the cluster's JWT key.
//
// It also holds the rules the operator follows when it acts on Slurm: a drain the operator
// sets carries slurmfacts.DrainReasonPrefix, and the operator only ever lifts drains with that prefix, so an
// admin's drain survives; a node counts as drained only from its state flags (IDLE and DRAIN,
// no COMPLETING, no allocated CPUs); when Slurm cannot be asked, callers must fail closed.
package slurm
