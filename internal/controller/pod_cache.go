package controller

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// sharedPods reads this node's pods from the manager's pod informer
// without copying them. A pod it returns is the informer's own object:
// the informer replaces an object on an update and never changes one in
// place, and neither may anyone who holds it. The pod controller hands
// these to the pod workers, which keep each pod's latest object for as
// long as the pod runs: a copy per pod kept beside the cache's own, and
// made again at every watch event of the pod, before.
type sharedPods struct {
	cache cache.Informers
	// indexer is read once, when the first pod is.
	indexer func() (toolscache.Indexer, error)
}

func newSharedPods(c cache.Informers) *sharedPods {
	p := &sharedPods{cache: c}
	p.indexer = sync.OnceValues(p.lookupIndexer)
	return p
}

// lookupIndexer finds the store of the pod informer. An informer that
// does not show it (none in controller-runtime has yet) is an error.
func (p *sharedPods) lookupIndexer() (toolscache.Indexer, error) {
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
func (p *sharedPods) Get(key types.NamespacedName) (*corev1.Pod, error) {
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
