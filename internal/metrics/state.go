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
	// PendingResizes counts the pods with a PodResizePending condition by
	// reason (deferred, infeasible) and priority bucket; InProgressResizes
	// those with PodResizeInProgress. Both nil when unknown.
	PendingResizes    map[PendingResize]int
	InProgressResizes *int
}

// PendingResize labels kubelet_pod_pending_resizes.
type PendingResize struct {
	// Reason is "deferred" or "infeasible".
	Reason string
	// PriorityBucket classifies the pod's priority (PriorityBucket).
	PriorityBucket string
}

// PriorityBucket is the kubelet's class of a pod priority in
// kubelet_pod_pending_resizes: system-critical, high, medium, normal, low
// or very-low.
func PriorityBucket(priority *int32) string {
	p := int32(0)
	if priority != nil {
		p = *priority
	}
	switch {
	case p >= 2000000000:
		return "system-critical"
	case p >= 100000:
		return "high"
	case p >= 1:
		return "medium"
	case p == 0:
		return "normal"
	case p >= -999:
		return "low"
	}
	return "very-low"
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
	pendingResizesDesc = prometheus.NewDesc("kubelet_pod_pending_resizes",
		"Number of pending resizes for pods. Label 'priority_bucket' classifies the pod priority (system-critical: >=2000000000, high: 100000..1999999999, medium: 1..99999, normal: 0/default, low: -999..-1, very-low: <=-1000, unknown: nil pod). Label 'reason' describes the state (deferred, infeasible).",
		[]string{"reason", "priority_bucket"}, nil)
	inProgressResizesDesc = prometheus.NewDesc("kubelet_pod_in_progress_resizes",
		"Number of in-progress resizes for pods.", nil, nil)
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
	ch <- pendingResizesDesc
	ch <- inProgressResizesDesc
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
	for k, n := range s.PendingResizes {
		ch <- prometheus.MustNewConstMetric(pendingResizesDesc, prometheus.GaugeValue, float64(n), k.Reason, k.PriorityBucket)
	}
	if s.InProgressResizes != nil {
		ch <- prometheus.MustNewConstMetric(inProgressResizesDesc, prometheus.GaugeValue, float64(*s.InProgressResizes))
	}
}
