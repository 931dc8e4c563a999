package objectstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/internal/metrics"
	"github.com/nodelet/nodelet/internal/podspec"
)

const servicesResource = "services"

// ServiceWatcher keeps the Services pods need for their environment: the
// default/kubernetes Service always (one watch by name), and all the
// Services of a namespace while a registered pod of that namespace has
// service links enabled (one watch per namespace, ref-counted by those pods,
// stopped when the last one goes). Nothing cluster-wide is watched. It is
// safe for concurrent use; run Start (a controller-runtime Runnable) so the
// watches stop with the manager.
type ServiceWatcher struct {
	client      kubernetes.Interface
	syncTimeout time.Duration
	log         logr.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	master *serviceWatch

	mu         sync.Mutex
	pods       map[types.UID]string // pod → namespace, pods with service links
	namespaces map[string]*serviceWatch
}

// serviceWatch is one reflector over Services and what it has seen.
type serviceWatch struct {
	store  *syncedStore
	cancel context.CancelFunc
	pods   int
}

// syncedStore is a cache.Store that knows when its first list arrived.
type syncedStore struct {
	cache.Store
	once   sync.Once
	synced chan struct{}
	mu     sync.Mutex
	err    error
}

func newSyncedStore() *syncedStore {
	return &syncedStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), synced: make(chan struct{})}
}

func (s *syncedStore) Replace(list []any, rv string) error {
	metrics.ObjectStoreLists.WithLabelValues(servicesResource).Inc()
	if err := s.Store.Replace(list, rv); err != nil {
		return err
	}
	s.once.Do(func() { close(s.synced) })
	return nil
}

func (s *syncedStore) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

func (s *syncedStore) wait(ctx context.Context, timeout time.Duration) error {
	select {
	case <-s.synced:
		return nil
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the first list: %w", ctx.Err())
	case <-t.C:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("no list within %v: %w", timeout, s.err)
	}
	return fmt.Errorf("no list within %v", timeout)
}

// NewServiceWatcher starts watching default/kubernetes. syncTimeout bounds
// how long a read waits for a new watch's first list (DefaultSyncTimeout
// when zero); log may be the zero Logger.
func NewServiceWatcher(c kubernetes.Interface, syncTimeout time.Duration, log logr.Logger) *ServiceWatcher {
	if syncTimeout <= 0 {
		syncTimeout = DefaultSyncTimeout
	}
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &ServiceWatcher{
		client: c, syncTimeout: syncTimeout, log: log, ctx: ctx, cancel: cancel,
		pods: map[types.UID]string{}, namespaces: map[string]*serviceWatch{},
	}
	w.master = w.startWatch(metav1.NamespaceDefault, podspec.MasterServiceName)
	return w
}

// Start blocks until ctx is done, then stops every watch and waits for them.
func (w *ServiceWatcher) Start(ctx context.Context) error {
	<-ctx.Done()
	w.cancel()
	w.wg.Wait()
	return nil
}

// NeedLeaderElection is false: a node agent never leader-elects.
func (w *ServiceWatcher) NeedLeaderElection() bool { return false }

// RegisterPod watches the Services of pod's namespace if the pod has
// service links enabled. Idempotent.
func (w *ServiceWatcher) RegisterPod(pod *v1.Pod) {
	if !NeedsServiceLinks(pod) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.pods[pod.UID]; ok {
		return
	}
	w.pods[pod.UID] = pod.Namespace
	sw, ok := w.namespaces[pod.Namespace]
	if !ok {
		sw = w.startWatch(pod.Namespace, "")
		w.namespaces[pod.Namespace] = sw
	}
	sw.pods++
}

// UnregisterPod releases pod's namespace; its watch stops with the last pod.
func (w *ServiceWatcher) UnregisterPod(pod *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ns, ok := w.pods[pod.UID]
	if !ok {
		return
	}
	delete(w.pods, pod.UID)
	sw := w.namespaces[ns]
	sw.pods--
	if sw.pods == 0 {
		delete(w.namespaces, ns)
		sw.cancel()
	}
}

// ServicesFor returns the default/kubernetes Service (nil when there is
// none) and the Services of namespace, sorted by name. The namespace must
// have a registered pod with service links; reads wait for first lists.
// While the API server is away the last Services seen are returned.
func (w *ServiceWatcher) ServicesFor(ctx context.Context, namespace string) (*v1.Service, []*v1.Service, error) {
	master, err := w.Master(ctx)
	if err != nil {
		return nil, nil, err
	}
	w.mu.Lock()
	sw := w.namespaces[namespace]
	w.mu.Unlock()
	if sw == nil {
		return nil, nil, fmt.Errorf("reading the Services of namespace %s: %w", namespace, ErrNotRegistered)
	}
	if err := sw.store.wait(ctx, w.syncTimeout); err != nil {
		return nil, nil, fmt.Errorf("reading the Services of namespace %s: %w", namespace, err)
	}
	var out []*v1.Service
	for _, obj := range sw.store.List() {
		if s, ok := obj.(*v1.Service); ok {
			out = append(out, s.DeepCopy())
		}
	}
	slices.SortFunc(out, func(a, b *v1.Service) int { return strings.Compare(a.Name, b.Name) })
	return master, out, nil
}

// Master returns the default/kubernetes Service, nil when there is none.
func (w *ServiceWatcher) Master(ctx context.Context) (*v1.Service, error) {
	if err := w.master.store.wait(ctx, w.syncTimeout); err != nil {
		return nil, fmt.Errorf("reading Service default/kubernetes: %w", err)
	}
	obj, ok, err := w.master.store.GetByKey(metav1.NamespaceDefault + "/" + podspec.MasterServiceName)
	if err != nil || !ok {
		return nil, err
	}
	return obj.(*v1.Service).DeepCopy(), nil
}

// ServiceEnv is the service environment of pod's containers
// (podspec.ServiceEnv over what this watcher holds): the pod must be
// registered when it has service links.
func (w *ServiceWatcher) ServiceEnv(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	if !NeedsServiceLinks(pod) {
		master, err := w.Master(ctx)
		if err != nil {
			return nil, err
		}
		return podspec.ServiceEnv(pod.Namespace, false, master, nil), nil
	}
	master, services, err := w.ServicesFor(ctx, pod.Namespace)
	if err != nil {
		return nil, err
	}
	return podspec.ServiceEnv(pod.Namespace, true, master, services), nil
}

// startWatch starts a reflector over the Services of namespace, only the
// one named name when name is set.
func (w *ServiceWatcher) startWatch(namespace, name string) *serviceWatch {
	store := newSyncedStore()
	c := w.client.CoreV1().Services(namespace)
	selector := ""
	if name != "" {
		selector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			obj, err := c.List(ctx, o)
			if err != nil {
				store.setErr(err)
			}
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			wi, err := c.Watch(ctx, o)
			if err != nil {
				store.setErr(err)
			}
			return wi, err
		},
	}
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, c), &v1.Service{}, store,
		cache.ReflectorOptions{Name: "Services " + namespace + "/" + name})
	ctx, cancel := context.WithCancel(w.ctx)
	metrics.ObjectStoreWatches.WithLabelValues(servicesResource).Inc()
	w.log.V(1).Info("Started watch", "kind", "Service", "namespace", namespace, "name", name)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer metrics.ObjectStoreWatches.WithLabelValues(servicesResource).Dec()
		r.RunWithContext(ctx)
		w.log.V(1).Info("Stopped watch", "kind", "Service", "namespace", namespace, "name", name)
	}()
	return &serviceWatch{store: store, cancel: cancel}
}
