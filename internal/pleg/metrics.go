package pleg

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	relistDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "nodelet_pleg_relist_duration_seconds",
		Help: "Duration of one relist of the runtime's sandboxes and containers, successful or not.",
		// 1ms to about 16s.
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	lastRelist = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "nodelet_pleg_last_relist_timestamp_seconds",
		Help: "Unix time of the last successful relist.",
	})
	relistErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_pleg_relist_errors_total",
		Help: "Number of relists that failed to list the runtime.",
	})

	registerMetricsOnce sync.Once
	registerMetricsErr  error
)

// registerMetrics adds the package's metrics to controller-runtime's registry
// once per process; collectors already registered are left alone.
func registerMetrics() error {
	registerMetricsOnce.Do(func() {
		for _, c := range []prometheus.Collector{relistDuration, lastRelist, relistErrors} {
			if err := metrics.Registry.Register(c); err != nil {
				var already prometheus.AlreadyRegisteredError
				if !errors.As(err, &already) {
					registerMetricsErr = fmt.Errorf("registering PLEG metrics: %w", err)
					return
				}
			}
		}
	})
	return registerMetricsErr
}
