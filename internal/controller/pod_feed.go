package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// podFeed lets reconcilers other than the pod reconciler enqueue pods in
// it: its Source is one of the pod controller's watches. Enqueueing with no
// pod controller running does nothing.
type podFeed struct {
	mu     sync.Mutex
	queues map[workqueue.TypedRateLimitingInterface[reconcile.Request]]struct{}
}

func newPodFeed() *podFeed {
	return &podFeed{queues: map[workqueue.TypedRateLimitingInterface[reconcile.Request]]struct{}{}}
}

// Source is the pod controller's end of the feed.
func (f *podFeed) Source() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		f.mu.Lock()
		f.queues[q] = struct{}{}
		f.mu.Unlock()
		context.AfterFunc(ctx, func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(f.queues, q)
		})
		return nil
	})
}

// Enqueue asks for a sync of the pod.
func (f *podFeed) Enqueue(pod types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for q := range f.queues {
		q.Add(reconcile.Request{NamespacedName: pod})
	}
}
