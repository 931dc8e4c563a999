// Package agent builds the controller-runtime manager of one nodelet: a
// cache scoped to its own node (its pods by spec.nodeName, its Node by name,
// managedFields stripped, no cluster-wide informer by accident), ConfigMaps,
// Secrets and Leases read straight from the API server, no leader election,
// health and readiness probes, Prometheus metrics and /configz.
package agent
