package prober

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Values of the result label of probeTotal.
const (
	metricSuccessful = "successful"
	metricFailed     = "failed"
	metricUnknown    = "unknown"
)

var (
	probeTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodelet_prober_probe_total",
		Help: "Number of container probes run, by probe type (Startup, Readiness, Liveness) and result (successful, failed, unknown for a probe that errored).",
	}, []string{"probe_type", "result"})
	probeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "nodelet_prober_probe_duration_seconds",
		Help: "Duration of one container probe, whatever its result, by probe type.",
		// 1ms to about 65s: probe timeouts are whole seconds.
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 17),
	}, []string{"probe_type"})

	registerMetricsOnce sync.Once
	registerMetricsErr  error
)

// registerMetrics adds the package's metrics to controller-runtime's
// registry once per process; collectors already registered are left alone.
func registerMetrics() error {
	registerMetricsOnce.Do(func() {
		for _, c := range []prometheus.Collector{probeTotal, probeDuration} {
			if err := metrics.Registry.Register(c); err != nil {
				var already prometheus.AlreadyRegisteredError
				if !errors.As(err, &already) {
					registerMetricsErr = fmt.Errorf("registering prober metrics: %w", err)
					return
				}
			}
		}
	})
	return registerMetricsErr
}
