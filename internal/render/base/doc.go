// Package base holds what every renderer shares: the Input a cluster is rendered from, the
// defaults applied in memory, labels, the restart hash, and pod building blocks (scheduling,
// munge sidecar, Slurm config and jail volumes).
//
// Like every package under internal/render it is pure: no API calls, no randomness, no clock,
// and the same input always gives byte-identical output.
package base
