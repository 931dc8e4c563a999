package stats

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestSpecValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  corev1.ResourceRequirements
		want containerSpecValues
	}{
		{name: "best effort", want: containerSpecValues{shares: 2, period: 100000}},
		{name: "request and memory limit", res: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}, want: containerSpecValues{memoryLimit: 1 << 30, shares: 1536, period: 100000}},
		{name: "a tiny request", res: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")},
		}, want: containerSpecValues{shares: 2, period: 100000}},
		{name: "a CPU limit", res: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
		}, want: containerSpecValues{shares: 204, quota: 20000, period: 100000}},
		{name: "a tiny CPU limit gets the minimum quota", res: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m")},
		}, want: containerSpecValues{shares: 2, quota: 1000, period: 100000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := specValues(&corev1.Container{Resources: tc.res}); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCadvisorMetricsFromInput(t *testing.T) {
	n := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		name string
		in   cadvisorInput
		want []string
		not  []string
	}{
		{
			name: "machine without a summary",
			in:   cadvisorInput{machine: cadvisorMachine{bootID: "b", cores: 4, memoryBytes: 2048}},
			want: []string{`machine_cpu_cores{boot_id="b",machine_id="",system_uuid=""} 4`, `machine_memory_bytes{boot_id="b",machine_id="",system_uuid=""} 2048`},
		},
		{
			name: "an unread machine size is not served",
			in:   cadvisorInput{},
			not:  []string{"machine_cpu_cores", "machine_memory_bytes"},
		},
		{
			name: "page faults of a running container",
			in: cadvisorInput{
				summary: &statsapi.Summary{Pods: []statsapi.PodStats{{
					PodRef:     statsapi.PodReference{Name: "p", Namespace: "ns", UID: "u"},
					Containers: []statsapi.ContainerStats{{Name: "c", Memory: &statsapi.MemoryStats{PageFaults: n(7), MajorPageFaults: n(1)}}},
				}}},
				ids: map[string]string{containerKey("u", "c"): "cid"},
			},
			want: []string{
				`container_memory_failures_total{container="c",failure_type="pgfault",id="",image="",name="cid",namespace="ns",pod="p",scope="container"} 7`,
				`container_memory_failures_total{container="c",failure_type="pgmajfault",id="",image="",name="cid",namespace="ns",pod="p",scope="container"} 1`,
			},
		},
		{
			name: "cgroup measures of a pod and its container",
			in: cadvisorInput{
				summary: &statsapi.Summary{Pods: []statsapi.PodStats{{
					PodRef:     statsapi.PodReference{Name: "p", Namespace: "ns", UID: "u"},
					Containers: []statsapi.ContainerStats{{Name: "c"}},
				}}},
				ids: map[string]string{containerKey("u", "c"): "cid"},
				cgroups: map[string]cgroupStats{
					containerKey("u", ""):  {cfsPeriods: n(10), processes: n(2)},
					containerKey("u", "c"): {cfsThrottledPeriods: n(4), threads: n(3)},
				},
				cgroupPaths: map[string]string{containerKey("u", ""): "/kubepods/podu", containerKey("u", "c"): "/kubepods/podu/cid"},
				netdev:      map[string][]netDev{"u": {{Name: "eth0", RxPackets: 5, TxPackets: 6, RxDropped: 1, TxDropped: 2}}},
			},
			want: []string{
				`container_cpu_cfs_periods_total{container="",id="/kubepods/podu",image="",name="",namespace="ns",pod="p"} 10`,
				`container_processes{container="",id="/kubepods/podu",image="",name="",namespace="ns",pod="p"} 2`,
				`container_cpu_cfs_throttled_periods_total{container="c",id="/kubepods/podu/cid",image="",name="cid",namespace="ns",pod="p"} 4`,
				`container_threads{container="c",id="/kubepods/podu/cid",image="",name="cid",namespace="ns",pod="p"} 3`,
				`container_network_receive_packets_total{container="",id="/kubepods/podu",image="",interface="eth0",name="",namespace="ns",pod="p"} 5`,
				`container_network_transmit_packets_total{container="",id="/kubepods/podu",image="",interface="eth0",name="",namespace="ns",pod="p"} 6`,
				`container_network_receive_packets_dropped_total{container="",id="/kubepods/podu",image="",interface="eth0",name="",namespace="ns",pod="p"} 1`,
				`container_network_transmit_packets_dropped_total{container="",id="/kubepods/podu",image="",interface="eth0",name="",namespace="ns",pod="p"} 2`,
			},
			not: []string{"container_memory_cache", "container_oom_events_total"},
		},
		{
			name: "a container the runtime no longer lists has no faults",
			in: cadvisorInput{summary: &statsapi.Summary{Pods: []statsapi.PodStats{{
				PodRef:     statsapi.PodReference{Name: "p", Namespace: "ns", UID: "u"},
				Containers: []statsapi.ContainerStats{{Name: "c", Memory: &statsapi.MemoryStats{PageFaults: n(7)}}},
			}}}},
			not: []string{"container_memory_failures_total"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			text := expositionOf(g, cadvisorMetrics(tc.in))
			for _, line := range tc.want {
				g.Expect(text).To(ContainElement(line))
			}
			for _, name := range tc.not {
				g.Expect(strings.Join(text, "\n")).NotTo(ContainSubstring(name))
			}
		})
	}
}

// expositionOf returns the text exposition lines of ms.
func expositionOf(g Gomega, ms []prometheus.Metric) []string {
	r := prometheus.NewRegistry()
	g.Expect(r.Register(metricsCollector(ms))).To(Succeed())
	families, err := r.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var b strings.Builder
	for _, mf := range families {
		_, err := expfmt.MetricFamilyToText(&b, mf)
		g.Expect(err).NotTo(HaveOccurred())
	}
	return strings.Split(b.String(), "\n")
}

// metricsCollector collects a fixed set of metrics, unchecked.
type metricsCollector []prometheus.Metric

func (metricsCollector) Describe(chan<- *prometheus.Desc) {}

func (c metricsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c {
		ch <- m
	}
}
