package controller

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

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
	r := &PodReconciler{Workers: workers, Static: newStaticPods(staticpod.SourceFile), Log: logr.Discard()}
	pods, err := staticpod.Decode([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: etcd, namespace: kube-system}\nspec:\n  containers: [{name: etcd, image: etcd:1}]\n"), staticpod.SourceFile, "/m/etcd.yaml", "n1")
	if err != nil {
		t.Fatal(err)
	}
	r.Static.pods.Set(staticpod.SourceFile, pods)
	static := pods[0]
	e := newEventRouter(r)

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
