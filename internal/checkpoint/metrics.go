package checkpoint

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	writeDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "nodelet_checkpoint_write_duration_seconds",
		Help: "Time to write a checkpoint durably: temporary file, fsync, rename and directory fsync.",
		// 250µs to about 8s: a page-cache write to a slow disk under load.
		Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
	})
	corruptTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nodelet_checkpoint_corrupt_total",
		Help: "Number of stored checkpoints found corrupt and moved aside.",
	})

	registerMetricsOnce sync.Once
	registerMetricsErr  error
)

// registerMetrics adds the package's metrics to controller-runtime's registry.
// It runs once per process; a collector that is already registered (by an
// earlier copy of this package's metrics, as in some tests) is left alone.
func registerMetrics() error {
	registerMetricsOnce.Do(func() {
		for _, c := range []prometheus.Collector{writeDuration, corruptTotal} {
			if err := metrics.Registry.Register(c); err != nil {
				var already prometheus.AlreadyRegisteredError
				if !errors.As(err, &already) {
					registerMetricsErr = fmt.Errorf("registering checkpoint metrics: %w", err)
					return
				}
			}
		}
	})
	return registerMetricsErr
}
