// Package dashboards checks that the dashboards people put in front of a
// kubelet read nodelet's /metrics/cadvisor the same way: the PromQL of
// kube-prometheus' "Kubernetes / Compute Resources / Pod" CPU and memory
// panels, and the kubernetes-mixin recording rules under them, evaluated
// with Prometheus' own engine over scrapes of nodelet recorded by the e2e
// suite (testdata), return the pod's values computed from those samples.
//
// It is a Go module of its own, so that nodelet's module does not require
// Prometheus (and what Prometheus requires): `make dashboards` runs it.
package dashboards
