// Package metrics defines nodelet's Prometheus metrics and registers them,
// once per process, on controller-runtime's registry (beside
// controller-runtime's own), which the manager serves on its metrics address
// and the node API on /metrics. The /metrics/resource families that
// metrics-server reads are not here: the node API serves them, computed from
// a stats summary at each scrape (internal/stats).
//
// Where a metric means what a kubelet metric means it carries the kubelet's
// name and labels (kubelet_running_pods, kubelet_runtime_operations_total,
// prober_probe_total, ...), so the kubelet's dashboards and alerts work
// unchanged; the nodelet_ names are for what the kubelet has no metric of.
// Packages record into the exported collectors; none registers its own on
// controller-runtime's registry but internal/volumestats, whose collector
// (kubelet_volume_stats_*) reads that package's cache at each scrape. This
// package imports nothing of nodelet's.
package metrics
