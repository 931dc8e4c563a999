package server

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
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	g.Expect(c.Update(context.Background(), pod)).To(Succeed())

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", http.NoBody))
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	ms := itoa(f.clock.Now().UnixMilli())
	ctr := `container="app",image="nodelet.test/busybox:1.35",name="` + f.ctrID + `",namespace="ns",pod="web"`
	lines := strings.Split(w.Body.String(), "\n")
	for _, line := range []string{
		"# TYPE container_cpu_usage_seconds_total counter",
		"# TYPE container_memory_working_set_bytes gauge",
		`container_cpu_usage_seconds_total{container="app",cpu="total",image="nodelet.test/busybox:1.35",name="` + f.ctrID + `",namespace="ns",pod="web"} 3 ` + ms,
		`container_memory_working_set_bytes{` + ctr + `} 4096 ` + ms,
		`container_memory_usage_bytes{` + ctr + `} 8192 ` + ms,
		`container_memory_rss{` + ctr + `} 1024 ` + ms,
		`container_spec_memory_limit_bytes{` + ctr + `} 6.7108864e+07`,
		`container_spec_cpu_shares{` + ctr + `} 256`,
		`container_fs_usage_bytes{container="app",device="",image="nodelet.test/busybox:1.35",name="` + f.ctrID + `",namespace="ns",pod="web"} 300 ` + ms,
		// The pod's own series: its cgroup as a whole.
		`container_cpu_usage_seconds_total{container="",cpu="total",image="",name="",namespace="ns",pod="web"} 3 ` + ms,
		`container_memory_working_set_bytes{container="",image="",name="",namespace="ns",pod="web"} 4096 ` + ms,
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
		name   string
		res    corev1.ResourceRequirements
		limit  int64
		shares uint64
	}{
		{name: "best effort", shares: 2},
		{name: "request and limit", res: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}, limit: 1 << 30, shares: 1536},
		{name: "a tiny request", res: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")},
		}, shares: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit, shares := specValues(&corev1.Container{Resources: tc.res})
			if limit != tc.limit || shares != tc.shares {
				t.Fatalf("got limit %d shares %d, want %d and %d", limit, shares, tc.limit, tc.shares)
			}
		})
	}
}
