package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is what the node runs at one moment, read when metrics are scraped.
// A nil map leaves its metric out of the scrape (its source was not
// readable).
type State struct {
	// PodsByPhase counts the pods bound to the node by phase.
	PodsByPhase map[string]int
	// RunningPods counts the pods with a ready sandbox; nil when unknown.
	RunningPods *int
	// ContainersByState counts owned containers by state: created,
	// running, exited, unknown.
	ContainersByState map[string]int
}

// StateFunc reads the node's State.
type StateFunc func(ctx context.Context) State

// SetStateSource makes scrapes read the node's state from fn. The pod
// reconciler sets it at setup; with several agents in one process (tests)
// the last one set is reported.
func SetStateSource(fn StateFunc) {
	runtimeState.mu.Lock()
	defer runtimeState.mu.Unlock()
	runtimeState.fn = fn
}

var (
	runningPodsDesc = prometheus.NewDesc("kubelet_running_pods",
		"Number of pods that have a running pod sandbox.", nil, nil)
	runningContainersDesc = prometheus.NewDesc("kubelet_running_containers",
		"Number of containers currently running, by state.", []string{"container_state"}, nil)
	podsDesc = prometheus.NewDesc("nodelet_pods",
		"Pods bound to this node, by phase.", []string{"phase"}, nil)
)

// stateCollector reports State when scraped.
type stateCollector struct {
	mu sync.Mutex
	fn StateFunc
}

var runtimeState = &stateCollector{}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningPodsDesc
	ch <- runningContainersDesc
	ch <- podsDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	fn := c.fn
	c.mu.Unlock()
	if fn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := fn(ctx)
	if s.RunningPods != nil {
		ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(*s.RunningPods))
	}
	for state, n := range s.ContainersByState {
		ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(n), state)
	}
	for phase, n := range s.PodsByPhase {
		ch <- prometheus.MustNewConstMetric(podsDesc, prometheus.GaugeValue, float64(n), phase)
	}
}
