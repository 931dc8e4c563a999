package objectstore

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/metrics"
)

// newEntryLocked makes the entry of k and, with the Watch strategy, starts
// its watch. s.mu is held.
func (s *Store) newEntryLocked(k key) *entry {
	e := newEntry(k)
	if s.opts.Strategy != v1alpha1.WatchChangeDetectionStrategy {
		return e
	}
	ctx, cancel := context.WithCancel(s.ctx)
	e.cancel = cancel
	r := cache.NewReflectorWithOptions(s.listWatch(e), k.newObject(), &entryStore{s: s, e: e},
		cache.ReflectorOptions{Name: fmt.Sprintf("%s %s", k.kind, k.ref())})
	metrics.ObjectStoreWatches.WithLabelValues(k.kind.resource()).Inc()
	s.opts.Logger.V(1).Info("Started watch", "kind", k.kind, "object", k.ref())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer metrics.ObjectStoreWatches.WithLabelValues(k.kind.resource()).Dec()
		r.RunWithContext(ctx)
		s.opts.Logger.V(1).Info("Stopped watch", "kind", k.kind, "object", k.ref())
	}()
	return e
}

// listWatch lists and watches the one object of e, by a metadata.name field
// selector in its namespace: what the Node authorizer lets a node do for an
// object its pods reference. Errors are kept for reads that wait.
func (s *Store) listWatch(e *entry) cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("metadata.name", e.key.name).String()
	ns, core := e.key.namespace, s.client.CoreV1()
	var (
		list      func(context.Context, metav1.ListOptions) (runtime.Object, error)
		watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)
		typed     any
	)
	switch e.key.kind {
	case KindSecret:
		c := core.Secrets(ns)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		watchFunc, typed = c.Watch, c
	default:
		c := core.ConfigMaps(ns)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		watchFunc, typed = c.Watch, c
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			obj, err := list(ctx, o)
			if err != nil {
				e.setErr(err)
			}
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			w, err := watchFunc(ctx, o)
			if err != nil {
				e.setErr(err)
			}
			return w, err
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, typed)
}

// entryStore is the reflector's store of one entry: it holds at most the
// one object the field selector lets through and hands every observation
// to the Store.
type entryStore struct {
	s *Store
	e *entry
}

func (st *entryStore) Add(obj any) error    { return st.put(obj) }
func (st *entryStore) Update(obj any) error { return st.put(obj) }

func (st *entryStore) put(obj any) error {
	o, ok := obj.(client.Object)
	if !ok {
		return fmt.Errorf("storing %s %s: unexpected type %T", st.e.key.kind, st.e.key.ref(), obj)
	}
	st.s.observe(st.e, o)
	return nil
}

func (st *entryStore) Delete(any) error {
	st.s.observe(st.e, nil)
	return nil
}

// Replace is the result of a (re)list: after the first one, after an
// expired resource version, after a watch that could not resume.
func (st *entryStore) Replace(list []any, _ string) error {
	metrics.ObjectStoreLists.WithLabelValues(st.e.key.kind.resource()).Inc()
	for _, obj := range list {
		o, ok := obj.(client.Object)
		if ok && o.GetName() == st.e.key.name && o.GetNamespace() == st.e.key.namespace {
			st.s.observe(st.e, o)
			return nil
		}
	}
	st.s.observe(st.e, nil)
	return nil
}

func (st *entryStore) Resync() error { return nil }
