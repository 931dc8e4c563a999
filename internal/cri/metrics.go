package cri

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	operationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "nodelet_cri_operation_duration_seconds",
		Help: "Duration of CRI operations, by operation, including the ownership checks before them.",
		// 500µs to about 4.5 min: a local status call up to a slow image pull.
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 15),
	}, []string{"operation"})
	operationErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodelet_cri_operation_errors_total",
		Help: "Number of CRI operations that returned an error, by operation.",
	}, []string{"operation"})

	registerMetricsOnce sync.Once
	registerMetricsErr  error
)

// registerMetrics adds the package's metrics to controller-runtime's registry
// once per process; collectors already registered are left alone.
func registerMetrics() error {
	registerMetricsOnce.Do(func() {
		for _, c := range []prometheus.Collector{operationDuration, operationErrors} {
			if err := metrics.Registry.Register(c); err != nil {
				var already prometheus.AlreadyRegisteredError
				if !errors.As(err, &already) {
					registerMetricsErr = fmt.Errorf("registering CRI metrics: %w", err)
					return
				}
			}
		}
	})
	return registerMetricsErr
}

// observe records one operation that started at start and ended with err.
func observe(operation string, start time.Time, err error) {
	operationDuration.WithLabelValues(operation).Observe(time.Since(start).Seconds())
	if err != nil {
		operationErrors.WithLabelValues(operation).Inc()
	}
}
