package agent

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"k8s.io/component-base/tracing"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// ServiceName is the OpenTelemetry service nodelet's spans belong to: the
// kubelet's, so that the trace views and queries written for the kubelet
// find nodelet's spans.
const ServiceName = "kubelet"

// NewTracerProvider returns the tracer provider of cfg's tracing block, as
// the kubelet builds its own: spans exported over OTLP gRPC to the
// endpoint (localhost:4317 when unset), sampled at samplingRatePerMillion
// unless a parent span decides, with the node's name as host.name. Without
// a tracing block it returns a provider that records nothing.
func NewTracerProvider(ctx context.Context, cfg *v1alpha1.NodeletConfiguration) (tracing.TracerProvider, error) {
	tp, err := tracing.NewProvider(ctx, cfg.Tracing, nil, []resource.Option{
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.HostName(cfg.NodeName)),
	})
	if err != nil {
		return nil, fmt.Errorf("setting up tracing: %w", err)
	}
	return tp, nil
}
