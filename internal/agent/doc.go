// Package agent builds the controller-runtime manager of one nodelet: a
// cache scoped to its own node (its pods by spec.nodeName, its Node by name,
// managedFields stripped, no cluster-wide informer by accident), ConfigMaps,
// Secrets and Leases read straight from the API server, no leader election,
// protobuf for every built-in kind, health and readiness probes, Prometheus
// metrics, and the /configz handler the node API serves. Its Events go out through a broadcaster of its own,
// whose correlator remembers as many Event series as the node's maxPods
// warrant rather than client-go's 4096.
package agent
