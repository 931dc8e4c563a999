package containerlogs

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The kubelet has no metric of its log rotations: these are nodelet's.
var (
	// rotations counts container logs rotated (renamed and reopened).
	rotations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_container_log_rotations_total",
		Help: "Number of container log files rotated.",
	})
	// rotationFailures counts rotations that failed at any step.
	rotationFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_container_log_rotation_failures_total",
		Help: "Number of container log rotations that failed.",
	})
	// linksRepaired counts log links made again by the periodic sweep.
	linksRepaired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_container_log_links_repaired_total",
		Help: "Number of missing container log links made again by the periodic sweep.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(rotations, rotationFailures, linksRepaired)
}
