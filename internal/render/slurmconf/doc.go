// Package slurmconf renders Slurm's configuration files (slurm.conf, gres.conf, cgroup.conf,
// plugstack.conf, slurmdbd.conf) as text. Every key is written explicitly here, one function
// per file; node lists are hostlist ranges so the files do not grow with the worker count.
// User text has been validated as single lines by the API; it is still folded to one line here.
package slurmconf
