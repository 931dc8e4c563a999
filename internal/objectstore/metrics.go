package objectstore

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	watches = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nodelet_object_store_watches",
		Help: "Watches open on referenced objects, by resource (configmaps, secrets; services: per namespace, plus default/kubernetes).",
	}, []string{"resource"})
	getRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodelet_object_store_get_requests_total",
		Help: "GET requests made for referenced objects (Cache and Get strategies), by resource.",
	}, []string{"resource"})
	lists = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodelet_object_store_lists_total",
		Help: "Lists of watched objects (the first one and relists after an expired resource version or a broken watch), by resource.",
	}, []string{"resource"})

	registerMetricsOnce sync.Once
	registerMetricsErr  error
)

// registerMetrics adds the package's metrics to controller-runtime's
// registry once per process.
func registerMetrics() error {
	registerMetricsOnce.Do(func() {
		for _, c := range []prometheus.Collector{watches, getRequests, lists} {
			if err := metrics.Registry.Register(c); err != nil {
				var already prometheus.AlreadyRegisteredError
				if !errors.As(err, &already) {
					registerMetricsErr = fmt.Errorf("registering object store metrics: %w", err)
					return
				}
			}
		}
	})
	return registerMetricsErr
}
