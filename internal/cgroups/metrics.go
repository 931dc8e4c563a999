package cgroups

import (
	"time"

	"github.com/nodelet/nodelet/internal/metrics"
)

// Operation types of kubelet_cgroup_manager_duration_seconds.
const (
	opCreate  = "create"
	opUpdate  = "update"
	opDestroy = "destroy"
)

func observe(op string, start time.Time) {
	metrics.CgroupManagerDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
