// Package exporter is the Slurm exporter's collector: on a scrape it asks slurmctld, through
// slurmrestd and the operator's own client (internal/slurm), for nodes, jobs, scheduler
// statistics and controller pings, and slurmdbd for its ping, one request per resource, each
// with a timeout; the answers are turned into Prometheus metrics by pure functions.
//
// A scrape never piles load on slurmctld: answers younger than Options.MinInterval are reused,
// concurrent scrapes share one refresh, and a resource that fails keeps its last good answer
// for at most Options.MaxAge, with its age exported, so stale counts are never presented as
// fresh. docs/observability.md lists every metric.
package exporter
