package objectstore

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// subscriber is one started Source: the queue of a controller.
type subscriber struct {
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// Source returns a controller-runtime source that adds a request named
// after the object (its namespace and name) to the controller's queue each
// time a referenced object of kind changes: updated, deleted, or created
// after it was missing. The queue coalesces bursts, so no change is lost
// and 100 quick updates are a few reconciles that read the last content.
// The source stops with the context it was started with.
func (s *Store) Source(kind Kind) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		sub := &subscriber{queue: q}
		s.mu.Lock()
		if s.subscribers[kind] == nil {
			s.subscribers[kind] = map[*subscriber]struct{}{}
		}
		s.subscribers[kind][sub] = struct{}{}
		s.mu.Unlock()
		context.AfterFunc(ctx, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.subscribers[kind], sub)
		})
		return nil
	})
}

// notify adds k to the queue of every source of its kind.
func (s *Store) notify(k key) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: k.namespace, Name: k.name}}
	s.mu.Lock()
	queues := make([]workqueue.TypedRateLimitingInterface[reconcile.Request], 0, len(s.subscribers[k.kind]))
	for sub := range s.subscribers[k.kind] {
		queues = append(queues, sub.queue)
	}
	s.mu.Unlock()
	for _, q := range queues {
		q.Add(req)
	}
}
