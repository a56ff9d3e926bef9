// Package activecheck runs the active checks of spec.activeChecks: batch jobs the operator
// submits to slurmrestd on idle workers (the job has its nodes to itself), whose results drain,
// comment or resume the workers. checks.go turns the spec into checks and batch scripts,
// step.go decides and acts at each look of the operator, pairs.go judges the bandwidth checks
// that run between pairs of workers.
package activecheck
