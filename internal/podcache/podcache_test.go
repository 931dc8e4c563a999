package podcache

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
	shared := NewShared(informers)

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
	list, err := shared.ListPods(context.Background())
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	if len(list) != 1 || list[0] != pod {
		t.Errorf("ListPods = %v, want the informer's own object alone", list)
	}
	if informers.calls != 1 {
		t.Errorf("the informer was looked up %d times, want once", informers.calls)
	}
}

func TestFromReaderListsEveryPod(t *testing.T) {
	a := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	b := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "b"}}
	got, err := FromReader(fake.NewClientBuilder().WithObjects(a, b).Build()).ListPods(context.Background())
	if err != nil {
		t.Fatalf("ListPods: %v", err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"ns/a", "other/b"}) {
		t.Errorf("ListPods = %v, want ns/a and other/b", names)
	}
}

// storeless is an informer that does not show its store.
type storeless struct{ cache.Informer }

func TestSharedPodsWithoutAStoreFail(t *testing.T) {
	shared := NewShared(&podInformers{inf: storeless{}})
	_, err := shared.Get(types.NamespacedName{Namespace: "ns", Name: "web"})
	if err == nil || apierrors.IsNotFound(err) {
		t.Fatalf("Get = %v, want an error that is not NotFound", err)
	}
	if _, err := shared.ListPods(context.Background()); err == nil {
		t.Fatal("ListPods succeeded without the informer's store")
	}
}
