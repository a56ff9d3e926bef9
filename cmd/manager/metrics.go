package main

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions serves the manager's metrics. Secure (the default): over HTTPS (a
// self-signed certificate unless one is mounted), and only to callers whose bearer token the
// API server authenticates (TokenReview) and who may GET the non-resource URL /metrics
// (SubjectAccessReview): Prometheus' service account bound to the chart's metrics-reader role.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
	}
}
