package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestCadvisorMetrics(t *testing.T) {
	g := NewWithT(t)
	f, h := summaryServer(t)
	// The pod's spec gives the image label and the spec families.
	c := f.provider.Pods.(client.Client)
	pod := &corev1.Pod{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "web"}, pod)).To(Succeed())
	pod.Spec.Containers[0].Image = "nodelet.test/busybox:1.35"
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
	}
	g.Expect(c.Update(context.Background(), pod)).To(Succeed())
	host := f.provider.Host.(fakeHost)
	host["/proc/sys/kernel/random/boot_id"] = "boot\n"
	host["/etc/machine-id"] = "machine\n"

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	ms := itoa(f.clock.Now().UnixMilli())
	ctr := `container="app",id="",image="nodelet.test/busybox:1.35",name="` + f.ctrID + `",namespace="ns",pod="web"`
	lines := strings.Split(w.Body.String(), "\n")
	for _, line := range []string{
		"# TYPE container_cpu_usage_seconds_total counter",
		"# TYPE container_memory_working_set_bytes gauge",
		`container_cpu_usage_seconds_total{container="app",cpu="total",id="",image="nodelet.test/busybox:1.35",name="` + f.ctrID + `",namespace="ns",pod="web"} 3 ` + ms,
		`container_memory_working_set_bytes{` + ctr + `} 4096 ` + ms,
		`container_memory_usage_bytes{` + ctr + `} 8192 ` + ms,
		`container_memory_rss{` + ctr + `} 1024 ` + ms,
		`container_spec_memory_limit_bytes{` + ctr + `} 6.7108864e+07`,
		`container_spec_cpu_shares{` + ctr + `} 256`,
		`container_spec_cpu_quota{` + ctr + `} 50000`,
		`container_spec_cpu_period{` + ctr + `} 100000`,
		`machine_cpu_cores{boot_id="boot",machine_id="machine",system_uuid=""} 2`,
		`machine_memory_bytes{boot_id="boot",machine_id="machine",system_uuid=""} 1.024e+06`,
		`container_fs_usage_bytes{container="app",device="",id="",image="nodelet.test/busybox:1.35",name="` + f.ctrID + `",namespace="ns",pod="web"} 300 ` + ms,
		`container_fs_limit_bytes{container="app",device="",id="",image="nodelet.test/busybox:1.35",name="` + f.ctrID + `",namespace="ns",pod="web"} 1000 ` + ms,
		// The pod's own series: its cgroup as a whole.
		`container_cpu_usage_seconds_total{container="",cpu="total",id="",image="",name="",namespace="ns",pod="web"} 3 ` + ms,
		`container_memory_working_set_bytes{container="",id="",image="",name="",namespace="ns",pod="web"} 4096 ` + ms,
	} {
		g.Expect(lines).To(ContainElement(line))
	}
	g.Expect(w.Body.String()).To(MatchRegexp(`(?m)^container_start_time_seconds\{` + strings.ReplaceAll(ctr, ".", `\.`) + `\} \S+$`))
	g.Expect(w.Body.String()).To(MatchRegexp(`(?m)^container_last_seen\{` + strings.ReplaceAll(ctr, ".", `\.`) + `\} \S+$`))
	g.Expect(w.Body.String()).NotTo(ContainSubstring(`pod="idle"`), "a pod without usage has no series")
	g.Expect(w.Body.String()).NotTo(ContainSubstring(`pod="elsewhere"`))

	// A scrape that cannot read the stats fails, rather than serving nothing.
	f.provider.Host = fakeHost{}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusInternalServerError))
}

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
				netdev:      map[string][]NetDev{"u": {{Name: "eth0", RxPackets: 5, TxPackets: 6, RxDropped: 1, TxDropped: 2}}},
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

// The read-only port serves /metrics/cadvisor without credentials, as the
// kubelet's does.
func TestCadvisorOnReadOnlyPort(t *testing.T) {
	g := NewWithT(t)
	f, _ := summaryServer(t)
	h := New(Options{NodeName: statsNode, ReadOnly: true, Pods: f.provider.Pods, Runtime: f.provider.Runtime, Stats: f.provider, Clock: f.clock}).Handler()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	g.Expect(w.Body.String()).To(ContainSubstring(`container_cpu_usage_seconds_total{container="app",cpu="total"`))
}
