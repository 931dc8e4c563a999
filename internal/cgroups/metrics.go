package cgroups

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Operation types of kubelet_cgroup_manager_duration_seconds.
const (
	opCreate  = "create"
	opUpdate  = "update"
	opDestroy = "destroy"
)

// managerDuration is the kubelet's cgroup_manager_duration_seconds: how
// long creating, updating and destroying cgroups takes.
var managerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "kubelet_cgroup_manager_duration_seconds",
	Help:    "Duration in seconds for cgroup manager operations. Broken down by method.",
	Buckets: prometheus.DefBuckets,
}, []string{"operation_type"})

func init() {
	ctrlmetrics.Registry.MustRegister(managerDuration)
}

func observe(op string, start time.Time) {
	managerDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
