package controller

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/podworkers"
)

func TestTracedSyncMakesASyncPodSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var inner oteltrace.SpanContext
	sync := tracedSync(tp, func(ctx context.Context, w podworkers.Work) podworkers.Result {
		inner = oteltrace.SpanContextFromContext(ctx)
		if w.Gone {
			return podworkers.Result{Err: errors.New("sandbox still running")}
		}
		return podworkers.Result{}
	})
	key := podworkers.Key{Namespace: "ns", Name: "web", UID: "u-1"}
	sync(context.Background(), podworkers.Work{Key: key, Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}})
	sync(context.Background(), podworkers.Work{Key: key, Gone: true})

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	if spans[1].SpanContext().TraceID() != inner.TraceID() || !inner.IsValid() {
		t.Error("the sync's context does not carry its span")
	}
	attrs := map[attribute.Key]string{}
	for _, a := range spans[0].Attributes() {
		attrs[a.Key] = a.Value.AsString()
	}
	for k, v := range map[attribute.Key]string{"k8s.pod.uid": "u-1", "k8s.pod": "ns/web", "k8s.pod.name": "web", "k8s.namespace.name": "ns", "k8s.pod.update_type": "sync"} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], v)
		}
	}
	if spans[0].Name() != "syncPod" || spans[0].InstrumentationScope().Name != podTracerName {
		t.Errorf("span %q of %q", spans[0].Name(), spans[0].InstrumentationScope().Name)
	}
	if spans[1].Status().Code != codes.Error {
		t.Errorf("a failed sync's span status %v, want Error", spans[1].Status())
	}
	if sync := tracedSync(nil, nil); sync != nil {
		t.Error("no provider: the sync is not returned unchanged")
	}
}
