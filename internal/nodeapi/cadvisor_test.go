package nodeapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/internal/stats/statstest"
)

func TestCadvisorMetrics(t *testing.T) {
	g := NewWithT(t)
	f, h := summaryServer(t)
	// The pod's spec gives the image label and the spec families.
	c := f.Provider.Pods.(client.Client)
	pod := &corev1.Pod{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "web"}, pod)).To(Succeed())
	pod.Spec.Containers[0].Image = "nodelet.test/busybox:1.35"
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
	}
	g.Expect(c.Update(context.Background(), pod)).To(Succeed())
	host := f.Provider.Host.(statstest.Host)
	host["/proc/sys/kernel/random/boot_id"] = "boot\n"
	host["/etc/machine-id"] = "machine\n"

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	ms := itoa(f.Clock.Now().UnixMilli())
	ctr := `container="app",id="",image="nodelet.test/busybox:1.35",name="` + f.ContainerID + `",namespace="ns",pod="web"`
	lines := strings.Split(w.Body.String(), "\n")
	for _, line := range []string{
		"# TYPE container_cpu_usage_seconds_total counter",
		"# TYPE container_memory_working_set_bytes gauge",
		`container_cpu_usage_seconds_total{container="app",cpu="total",id="",image="nodelet.test/busybox:1.35",name="` + f.ContainerID + `",namespace="ns",pod="web"} 3 ` + ms,
		`container_memory_working_set_bytes{` + ctr + `} 4096 ` + ms,
		`container_memory_usage_bytes{` + ctr + `} 8192 ` + ms,
		`container_memory_rss{` + ctr + `} 1024 ` + ms,
		`container_spec_memory_limit_bytes{` + ctr + `} 6.7108864e+07`,
		`container_spec_cpu_shares{` + ctr + `} 256`,
		`container_spec_cpu_quota{` + ctr + `} 50000`,
		`container_spec_cpu_period{` + ctr + `} 100000`,
		`machine_cpu_cores{boot_id="boot",machine_id="machine",system_uuid=""} 2`,
		`machine_memory_bytes{boot_id="boot",machine_id="machine",system_uuid=""} 1.024e+06`,
		`container_fs_usage_bytes{container="app",device="",id="",image="nodelet.test/busybox:1.35",name="` + f.ContainerID + `",namespace="ns",pod="web"} 300 ` + ms,
		`container_fs_limit_bytes{container="app",device="",id="",image="nodelet.test/busybox:1.35",name="` + f.ContainerID + `",namespace="ns",pod="web"} 1000 ` + ms,
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
	f.Provider.Host = statstest.Host{}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusInternalServerError))
}

// The read-only port serves /metrics/cadvisor without credentials, as the
// kubelet's does.
func TestCadvisorOnReadOnlyPort(t *testing.T) {
	g := NewWithT(t)
	f, _ := summaryServer(t)
	h := New(Options{NodeName: statstest.NodeName, ReadOnly: true, Pods: f.Provider.Pods, Runtime: f.Provider.Runtime, Stats: f.Provider, Clock: f.Clock}).Handler()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	g.Expect(w.Body.String()).To(ContainSubstring(`container_cpu_usage_seconds_total{container="app",cpu="total"`))
}
