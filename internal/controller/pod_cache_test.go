package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podInformers is a cache.Informers whose pod informer is inf; it
// implements nothing else.
type podInformers struct {
	cache.Informers
	inf   cache.Informer
	calls int
}

func (p *podInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	p.calls++
	if _, ok := obj.(*corev1.Pod); !ok {
		panic("only pods are read")
	}
	return p.inf, nil
}

func TestSharedPodsReadTheInformersObjects(t *testing.T) {
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &corev1.Pod{}, 0, toolscache.Indexers{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}}
	if err := inf.GetIndexer().Add(pod); err != nil {
		t.Fatal(err)
	}
	informers := &podInformers{inf: inf}
	shared := newSharedPods(informers)

	got, err := shared.Get(types.NamespacedName{Namespace: "ns", Name: "web"})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got != pod {
		t.Error("Get returned a copy, want the informer's own object")
	}
	for _, key := range []types.NamespacedName{{Namespace: "ns", Name: "db"}, {Namespace: "other", Name: "web"}} {
		if _, err := shared.Get(key); !apierrors.IsNotFound(err) {
			t.Errorf("Get(%s) = %v, want NotFound", key, err)
		}
	}
	if informers.calls != 1 {
		t.Errorf("the informer was looked up %d times, want once", informers.calls)
	}
}

// storeless is an informer that does not show its store.
type storeless struct{ cache.Informer }

func TestSharedPodsWithoutAStoreFail(t *testing.T) {
	shared := newSharedPods(&podInformers{inf: storeless{}})
	_, err := shared.Get(types.NamespacedName{Namespace: "ns", Name: "web"})
	if err == nil || apierrors.IsNotFound(err) {
		t.Fatalf("Get = %v, want an error that is not NotFound", err)
	}
}
