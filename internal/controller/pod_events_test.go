package controller

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nodelet/nodelet/internal/pleg"
	"github.com/nodelet/nodelet/internal/podworkers"
	"github.com/nodelet/nodelet/internal/staticpod"
)

// TestEventRouter: a static pod's runtime events go to its worker, never
// to the pod controller (which does not know static pods and may not run
// yet); others go to the controller, and are dropped when it does not take
// them rather than blocking the static pods' events.
func TestEventRouter(t *testing.T) {
	workers, err := podworkers.New(podworkers.Options{Sync: func(context.Context, podworkers.Work) podworkers.Result { return podworkers.Result{} }, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	r := &PodReconciler{Workers: workers, Static: staticpod.NewStore(staticpod.SourceFile), Log: logr.Discard()}
	pods, err := staticpod.Decode([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: etcd, namespace: kube-system}\nspec:\n  containers: [{name: etcd, image: etcd:1}]\n"), staticpod.SourceFile, "/m/etcd.yaml", "n1")
	if err != nil {
		t.Fatal(err)
	}
	r.Static.Set(staticpod.SourceFile, pods)
	static := pods[0]
	e := newEventRouter(r, nil)

	stub := func(ns, name string, uid types.UID) event.TypedGenericEvent[*corev1.Pod] {
		p := &corev1.Pod{}
		p.Namespace, p.Name, p.UID = ns, name, uid
		return event.TypedGenericEvent[*corev1.Pod]{Object: p}
	}
	e.route(stub(static.Namespace, static.Name, static.UID))
	if !workers.Has(static.UID) {
		t.Fatal("a static pod's event did not reach its worker")
	}
	if len(e.out) != 0 {
		t.Fatal("a static pod's event went to the pod controller")
	}
	for range podEventCapacity + 10 {
		e.route(stub("default", "web", "other"))
	}
	if len(e.out) != podEventCapacity {
		t.Fatalf("%d events for the controller, want %d (the rest dropped)", len(e.out), podEventCapacity)
	}
}

// fakeRelisted is a relister that listed n times and holds records.
type fakeRelisted struct {
	n       uint64
	records map[types.UID]*pleg.PodRecord
}

func (f *fakeRelisted) Listed() uint64                       { return f.n }
func (f *fakeRelisted) Record(uid types.UID) *pleg.PodRecord { return f.records[uid] }

// TestRuntimeEventsNudgeWorkers: the relister's event for a pod with a
// worker goes to the worker, whose sync runs; one for a pod without a
// worker (known only from the runtime) goes to the pod controller.
func TestRuntimeEventsNudgeWorkers(t *testing.T) {
	synced := make(chan podworkers.Work, 10)
	workers, err := podworkers.New(podworkers.Options{Sync: func(_ context.Context, w podworkers.Work) podworkers.Result {
		synced <- w
		return podworkers.Result{}
	}, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = workers.Start(ctx) }()
	r := &PodReconciler{Workers: workers, Static: staticpod.NewStore(staticpod.SourceFile), Log: logr.Discard(), Relisted: &fakeRelisted{n: 7}}
	e := newEventRouter(r, nil)
	stub := func(uid types.UID) event.TypedGenericEvent[*corev1.Pod] {
		p := &corev1.Pod{}
		p.Namespace, p.Name, p.UID = "default", "web-"+string(uid), uid
		return event.TypedGenericEvent[*corev1.Pod]{Object: p}
	}
	p := &corev1.Pod{}
	p.Namespace, p.Name, p.UID = "default", "web-a", "a"
	workers.Update(p)
	<-synced

	e.routeRuntime(stub("a"))
	select {
	case w := <-synced:
		if w.Key.UID != "a" {
			t.Fatalf("synced %s, want a", w.Key.UID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the nudged worker did not sync (no Settled: every nudge syncs)")
	}
	if len(e.out) != 0 {
		t.Fatal("an event for a pod with a worker went to the pod controller")
	}
	e.routeRuntime(stub("b"))
	if len(e.out) != 1 || workers.Has("b") {
		t.Fatal("an event for a pod without a worker did not go to the pod controller")
	}
}
