package controller

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/nodelet/nodelet/internal/podworkers"
)

// podTracerName names the tracer of pod syncs, the kubelet's.
const podTracerName = "k8s.io/kubernetes/pkg/kubelet"

// tracedSync wraps sync in a syncPod span per sync, with the kubelet's
// attributes, whose context the CRI calls of the sync inherit; tp nil
// returns sync unchanged.
func tracedSync(tp oteltrace.TracerProvider, sync podworkers.SyncFunc) podworkers.SyncFunc {
	if tp == nil {
		return sync
	}
	tracer := tp.Tracer(podTracerName)
	return func(ctx context.Context, w podworkers.Work) podworkers.Result {
		ctx, span := tracer.Start(ctx, "syncPod", oteltrace.WithAttributes(syncAttributes(w)...))
		defer span.End()
		res := sync(ctx, w)
		if res.Err != nil {
			span.RecordError(res.Err)
			span.SetStatus(codes.Error, res.Err.Error())
		}
		return res
	}
}

// syncAttributes are a sync's span attributes: the pod, and the kind of
// sync as the kubelet names it (kill for a pod being stopped, sync else).
func syncAttributes(w podworkers.Work) []attribute.KeyValue {
	update := "sync"
	if w.Gone || (w.Pod != nil && w.Pod.DeletionTimestamp != nil) {
		update = "kill"
	}
	return []attribute.KeyValue{
		semconv.K8SPodUID(string(w.Key.UID)),
		attribute.String("k8s.pod", w.Key.Namespace+"/"+w.Key.Name),
		semconv.K8SPodName(w.Key.Name),
		attribute.String("k8s.pod.update_type", update),
		semconv.K8SNamespaceName(w.Key.Namespace),
	}
}
