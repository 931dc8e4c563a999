package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// CgroupManagerDuration is the kubelet's cgroup_manager_duration_seconds:
// how long making (create), setting (update) and removing (destroy) the
// pod and QoS cgroups takes.
var CgroupManagerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "kubelet_cgroup_manager_duration_seconds",
	Help:    "Duration in seconds for cgroup manager operations. Broken down by method.",
	Buckets: prometheus.DefBuckets,
}, []string{"operation_type"})

func init() {
	ctrlmetrics.Registry.MustRegister(CgroupManagerDuration)
}
