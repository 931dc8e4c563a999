package controllers

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodelet/nodelet/internal/cri"
)

// podMetrics are the pod reconciler's Prometheus metrics.
type podMetrics struct {
	startDuration prometheus.Histogram
	statusWrites  prometheus.Counter

	mu        sync.Mutex
	firstSeen map[types.UID]time.Time
	started   map[types.UID]bool
}

var (
	podMetricsOnce sync.Once
	podMetricsInst *podMetrics
)

// newPodMetrics registers the pod metrics once per process (several
// managers in one test binary share them) and the state collector of the
// latest caller.
func newPodMetrics(reader client.Reader, rt cri.Runtime) *podMetrics {
	podMetricsOnce.Do(func() {
		podMetricsInst = &podMetrics{
			startDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "nodelet_pod_start_duration_seconds",
				Help:    "Time from nodelet first seeing a pod to all its containers running.",
				Buckets: []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 20, 30, 60},
			}),
			statusWrites: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "nodelet_pod_status_writes_total",
				Help: "Pod status patches sent to the API server.",
			}),
			firstSeen: map[types.UID]time.Time{},
			started:   map[types.UID]bool{},
		}
		metrics.Registry.MustRegister(podMetricsInst.startDuration, podMetricsInst.statusWrites,
			&stateCollector{reader: reader, runtime: rt})
	})
	return podMetricsInst
}

// seen records when a pod was first seen.
func (m *podMetrics) seen(uid types.UID, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.firstSeen[uid]; !ok && !m.started[uid] {
		m.firstSeen[uid] = now
	}
}

// observeStart records the start duration the first time every container
// of the pod runs.
func (m *podMetrics) observeStart(pod *corev1.Pod, status corev1.PodStatus, now time.Time) {
	if status.Phase != corev1.PodRunning || len(status.ContainerStatuses) == 0 {
		return
	}
	for _, cs := range status.ContainerStatuses {
		if cs.State.Running == nil {
			return
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	first, ok := m.firstSeen[pod.UID]
	if !ok || m.started[pod.UID] {
		return
	}
	m.started[pod.UID] = true
	delete(m.firstSeen, pod.UID)
	m.startDuration.Observe(now.Sub(first).Seconds())
}

// forget drops what is kept of a pod that is gone.
func (m *podMetrics) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.firstSeen, uid)
	delete(m.started, uid)
}

// stateCollector counts pods by phase and containers by state when scraped.
type stateCollector struct {
	reader  client.Reader
	runtime cri.Runtime
}

var (
	podsDesc       = prometheus.NewDesc("nodelet_pods", "Pods bound to this node, by phase.", []string{"phase"}, nil)
	containersDesc = prometheus.NewDesc("nodelet_containers", "Containers nodelet owns in the runtime, by state.", []string{"state"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- podsDesc
	ch <- containersDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := c.reader.List(ctx, &pods); err == nil {
		counts := map[string]float64{}
		for _, p := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed} {
			counts[string(p)] = 0
		}
		for i := range pods.Items {
			counts[string(pods.Items[i].Status.Phase)]++
		}
		for phase, n := range counts {
			ch <- prometheus.MustNewConstMetric(podsDesc, prometheus.GaugeValue, n, phase)
		}
	}
	if containers, err := c.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{}); err == nil {
		counts := map[string]float64{"created": 0, "running": 0, "exited": 0, "unknown": 0}
		for _, ctr := range containers {
			switch ctr.State {
			case runtimeapi.ContainerState_CONTAINER_CREATED:
				counts["created"]++
			case runtimeapi.ContainerState_CONTAINER_RUNNING:
				counts["running"]++
			case runtimeapi.ContainerState_CONTAINER_EXITED:
				counts["exited"]++
			default:
				counts["unknown"]++
			}
		}
		for state, n := range counts {
			ch <- prometheus.MustNewConstMetric(containersDesc, prometheus.GaugeValue, n, state)
		}
	}
}
