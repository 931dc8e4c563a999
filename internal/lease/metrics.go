package lease

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	renewDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "nodelet_lease_renew_duration_seconds",
		Help:    "Time taken by one attempt to renew the node lease, successful or not.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	renewFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_lease_renew_failures_total",
		Help: "Attempts to renew the node lease that failed.",
	})
)

func init() {
	metrics.Registry.MustRegister(renewDuration, renewFailures)
}
