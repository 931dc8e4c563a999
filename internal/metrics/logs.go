package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Container log rotation. The kubelet has no metric of its log rotations:
// these are nodelet's.
var (
	// ContainerLogRotations counts container logs rotated (renamed and
	// reopened).
	ContainerLogRotations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_container_log_rotations_total",
		Help: "Number of container log files rotated.",
	})
	// ContainerLogRotationFailures counts rotations that failed at any step.
	ContainerLogRotationFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_container_log_rotation_failures_total",
		Help: "Number of container log rotations that failed.",
	})
	// ContainerLogLinksRepaired counts log links made again by the
	// periodic sweep.
	ContainerLogLinksRepaired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_container_log_links_repaired_total",
		Help: "Number of missing container log links made again by the periodic sweep.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(ContainerLogRotations, ContainerLogRotationFailures, ContainerLogLinksRepaired)
}
