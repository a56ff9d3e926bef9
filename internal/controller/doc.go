// Package controller reconciles SlurmCluster objects. The reconciler is thin: it reads the
// SlurmCluster and the facts it needs (existing keys, optional APIs, children's state), calls
// the pure renderers in internal/render, applies the result with server-side apply under one
// field owner, and computes the status. A reconcile that changes nothing writes nothing.
package controller
