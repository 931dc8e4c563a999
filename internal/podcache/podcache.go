package podcache

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Lister lists the pods a cache holds: this node's. The pods are shared
// and nobody may change them.
type Lister interface {
	ListPods(ctx context.Context) ([]*corev1.Pod, error)
}

// Shared reads the pods of the manager's pod informer from its store.
type Shared struct {
	cache cache.Informers
	// indexer is read once, when the first pod is.
	indexer func() (toolscache.Indexer, error)
}

// NewShared returns the pods of c's pod informer; the informer is looked
// up at the first read.
func NewShared(c cache.Informers) *Shared {
	p := &Shared{cache: c}
	p.indexer = sync.OnceValues(p.lookupIndexer)
	return p
}

// lookupIndexer finds the store of the pod informer. An informer that
// does not show it (none in controller-runtime has yet) is an error.
func (p *Shared) lookupIndexer() (toolscache.Indexer, error) {
	inf, err := p.cache.GetInformer(context.Background(), &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("reading the pod informer: %w", err)
	}
	ix, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, fmt.Errorf("the pod informer (%T) shows no store", inf)
	}
	return ix.GetIndexer(), nil
}

// Get returns the cached pod of key, or a NotFound error.
func (p *Shared) Get(key types.NamespacedName) (*corev1.Pod, error) {
	ix, err := p.indexer()
	if err != nil {
		return nil, err
	}
	obj, exists, err := ix.GetByKey(key.Namespace + "/" + key.Name)
	if err != nil {
		return nil, fmt.Errorf("reading pod %s from the cache: %w", key, err)
	}
	if !exists {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("the pod cache holds a %T for %s", obj, key)
	}
	return pod, nil
}

// ListPods returns every cached pod, in no order.
func (p *Shared) ListPods(context.Context) ([]*corev1.Pod, error) {
	ix, err := p.indexer()
	if err != nil {
		return nil, err
	}
	objs := ix.List()
	out := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, fmt.Errorf("the pod cache holds a %T", obj)
		}
		out = append(out, pod)
	}
	return out, nil
}

// FromReader lists the pods through r (a List of r's pods, not deep-copied
// where r is a cache): for readers that are not a manager's cache.
func FromReader(r client.Reader) Lister { return readerLister{r} }

type readerLister struct{ r client.Reader }

func (l readerLister) ListPods(ctx context.Context) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := l.r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
