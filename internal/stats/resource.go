package stats

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The families of /metrics/resource, with the kubelet's names and labels,
// the ones metrics-server reads.
var (
	nodeCPUDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"Current working set of the node in bytes", nil, nil)
	containerCPUDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil)
	containerMemoryDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil)
	containerStartDesc = prometheus.NewDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil)
	podCPUDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil)
	podMemoryDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Current working set of the pod in bytes", []string{"pod", "namespace"}, nil)
	scrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// resourceCollector turns a fresh CPU-and-memory summary into the
// /metrics/resource families at every scrape.
type resourceCollector struct{ p *Provider }

// ResourceRegistry returns a registry that serves /metrics/resource.
func (p *Provider) ResourceRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(resourceCollector{p})
	return r
}

func (c resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeCPUDesc, nodeMemoryDesc, containerCPUDesc, containerMemoryDesc,
		containerStartDesc, podCPUDesc, podMemoryDesc, scrapeErrorDesc} {
		ch <- d
	}
}

func (c resourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sum, err := c.p.Summary(ctx, true)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorDesc, prometheus.GaugeValue, 0)
	emitCPU(ch, nodeCPUDesc, sum.Node.CPU)
	emitMemory(ch, nodeMemoryDesc, sum.Node.Memory)
	for _, pod := range sum.Pods {
		emitCPU(ch, podCPUDesc, pod.CPU, pod.PodRef.Name, pod.PodRef.Namespace)
		emitMemory(ch, podMemoryDesc, pod.Memory, pod.PodRef.Name, pod.PodRef.Namespace)
		for _, ctr := range pod.Containers {
			labels := []string{ctr.Name, pod.PodRef.Name, pod.PodRef.Namespace}
			emitCPU(ch, containerCPUDesc, ctr.CPU, labels...)
			emitMemory(ch, containerMemoryDesc, ctr.Memory, labels...)
			ch <- prometheus.NewMetricWithTimestamp(ctr.StartTime.Time, prometheus.MustNewConstMetric(
				containerStartDesc, prometheus.GaugeValue, float64(ctr.StartTime.UnixNano())/1e9, labels...))
		}
	}
}

func emitCPU(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.CPUStats, labels ...string) {
	if s == nil || s.UsageCoreNanoSeconds == nil {
		return
	}
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time, prometheus.MustNewConstMetric(
		d, prometheus.CounterValue, float64(*s.UsageCoreNanoSeconds)/1e9, labels...))
}

func emitMemory(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsapi.MemoryStats, labels ...string) {
	if s == nil || s.WorkingSetBytes == nil {
		return
	}
	ch <- prometheus.NewMetricWithTimestamp(s.Time.Time, prometheus.MustNewConstMetric(
		d, prometheus.GaugeValue, float64(*s.WorkingSetBytes), labels...))
}
