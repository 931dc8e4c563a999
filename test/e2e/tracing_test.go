package e2e

import (
	"context"
	"net"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/test/utils"
)

// spanCollector is an OTLP gRPC trace receiver that keeps what it is sent.
type spanCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []receivedSpan
}

// receivedSpan is a span with its service's name.
type receivedSpan struct {
	service string
	span    *tracev1.Span
}

func (c *spanCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, receivedSpan{service: service, span: s})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (c *spanCollector) received() []receivedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]receivedSpan(nil), c.spans...)
}

func spanAttribute(s *tracev1.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

var _ = Describe("Tracing", Ordered, func() {
	const node = "e2e-tracing"
	collector := &spanCollector{}
	var endpoint string
	BeforeAll(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		srv := grpc.NewServer()
		collectortrace.RegisterTraceServiceServer(srv, collector)
		go func() { _ = srv.Serve(ln) }()
		DeferCleanup(srv.Stop)
		endpoint = ln.Addr().String()
	})

	env := utils.SetUpNodeletSpecs(func() utils.NodeletOptions {
		return utils.NodeletOptions{NodeName: node, API: apiServer, Containerd: ctrd, Config: map[string]any{
			"tracing": map[string]any{"endpoint": endpoint, "samplingRatePerMillion": 1000000},
		}}
	})

	It("exports a syncPod span for each pod sync, with the pod's CRI calls in its trace", func(ctx SpecContext) {
		ns := utils.NewNamespace(ctx, env.Admin)
		pod := utils.BusyboxPod(ns, "traced", node, "sleep", "3600")
		Expect(env.Admin.Create(ctx, pod)).To(Succeed())
		utils.WaitForPod(ctx, env.Admin, ns, "traced", podStartTimeout, func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		})
		Eventually(func(g Gomega) {
			traces := map[string]bool{}
			for _, s := range collector.received() {
				if s.span.GetName() == "syncPod" && spanAttribute(s.span, "k8s.pod.name") == "traced" && spanAttribute(s.span, "k8s.namespace.name") == ns {
					g.Expect(s.service).To(Equal("kubelet"))
					traces[string(s.span.GetTraceId())] = true
				}
			}
			g.Expect(traces).NotTo(BeEmpty(), "a syncPod span of the pod")
			var calls []string
			for _, s := range collector.received() {
				if traces[string(s.span.GetTraceId())] && s.span.GetName() != "syncPod" {
					calls = append(calls, s.span.GetName())
				}
			}
			g.Expect(calls).To(ContainElements("runtime.v1.RuntimeService/RunPodSandbox", "runtime.v1.RuntimeService/StartContainer"))
		}).WithContext(ctx).WithTimeout(apiTimeout).WithPolling(pollInterval).Should(Succeed())
	})
})
