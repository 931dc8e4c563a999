// Package metrics defines every Prometheus metric nodelet exports and
// registers them, once per process, on controller-runtime's registry, which
// the manager serves on its metrics address.
//
// Where a metric means what a kubelet metric means it carries the kubelet's
// name and labels (kubelet_running_pods, kubelet_runtime_operations_total,
// prober_probe_total, ...), so the kubelet's dashboards and alerts work
// unchanged; the nodelet_ names are for what the kubelet has no metric of.
// Packages record into the exported collectors; none registers its own.
package metrics
