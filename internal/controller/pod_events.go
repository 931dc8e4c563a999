package controller

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// podEventCapacity is how many events for the pod controller the router
// holds while the controller does not take them.
const podEventCapacity = 1024

// eventRouter passes the relister's and the prober's pod events on. A
// static pod's go straight to its worker: the pod controller does not know
// static pods, and does not run before the API server is reached. The
// others go to the pod controller; while it does not run (no API server
// yet) what does not fit is dropped, as it lists every pod when it starts.
//
// The relister's events for a pod with a worker nudge the worker instead:
// its sync is skipped when the pod's last sync saw the change already (a
// pod's own sandbox and containers starting, mostly).
type eventRouter struct {
	runtime <-chan event.TypedGenericEvent[*corev1.Pod]
	in      []<-chan event.TypedGenericEvent[*corev1.Pod]
	out     chan event.TypedGenericEvent[*corev1.Pod]
	r       *PodReconciler
}

func newEventRouter(r *PodReconciler, runtime <-chan event.TypedGenericEvent[*corev1.Pod], in ...<-chan event.TypedGenericEvent[*corev1.Pod]) *eventRouter {
	return &eventRouter{runtime: runtime, in: in, out: make(chan event.TypedGenericEvent[*corev1.Pod], podEventCapacity), r: r}
}

// Source is the pod controller's end of the router.
func (e *eventRouter) Source() source.Source {
	return source.Channel(e.out, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{})
}

// Start routes events until ctx ends.
func (e *eventRouter) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	loop := func(in <-chan event.TypedGenericEvent[*corev1.Pod], route func(event.TypedGenericEvent[*corev1.Pod])) {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-in:
				route(ev)
			}
		}
	}
	if e.runtime != nil {
		wg.Go(func() { loop(e.runtime, e.routeRuntime) })
	}
	for _, in := range e.in {
		wg.Go(func() { loop(in, e.route) })
	}
	wg.Wait()
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (e *eventRouter) NeedLeaderElection() bool { return false }

func (e *eventRouter) routeRuntime(ev event.TypedGenericEvent[*corev1.Pod]) {
	if p, rl := ev.Object, e.r.Relisted; p != nil && rl != nil && e.r.Workers.Nudge(p.UID, rl.Listed()) {
		return
	}
	e.route(ev)
}

func (e *eventRouter) route(ev event.TypedGenericEvent[*corev1.Pod]) {
	if p := ev.Object; p != nil {
		if sp, ok := e.r.Static.Get(p.Namespace, p.Name); ok {
			e.r.Workers.Update(sp)
			return
		}
	}
	select {
	case e.out <- ev:
	default:
	}
}
