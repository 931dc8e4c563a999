package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Eviction.
var (
	// Evictions counts pods evicted, by the signal that made nodelet evict
	// them.
	Evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kubelet_evictions",
		Help: "Cumulative number of pod evictions by eviction signal",
	}, []string{"eviction_signal"})
	// EvictionStatsAge times, by signal, how old the measures an eviction
	// was decided on were when the pod was evicted.
	EvictionStatsAge = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kubelet_eviction_stats_age_seconds",
		Help:    "Time between when stats are collected, and when pod is evicted based on those stats by eviction signal",
		Buckets: prometheus.DefBuckets,
	}, []string{"eviction_signal"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(Evictions, EvictionStatsAge)
}
