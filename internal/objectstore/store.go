package objectstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodelet/nodelet/api/v1alpha1"
	"github.com/nodelet/nodelet/internal/metrics"
)

// ErrNotRegistered is returned for an object no registered pod references
// (with the Watch and Cache strategies; Get reads any object directly).
var ErrNotRegistered = errors.New("object is not referenced by a registered pod")

// Default option values.
const (
	DefaultCacheTTL    = time.Minute
	DefaultSyncTimeout = 5 * time.Second
)

// Options configure a Store. The zero value is the Watch strategy.
type Options struct {
	// Strategy is Watch (default), Cache or Get.
	Strategy v1alpha1.ChangeDetectionStrategy
	// CacheTTL is how long the Cache strategy uses an object before reading
	// it again. Default: DefaultCacheTTL.
	CacheTTL time.Duration
	// SyncTimeout bounds how long a read waits for a new watch's first list
	// (the kubelet waits a second). Default: DefaultSyncTimeout.
	SyncTimeout time.Duration
	// Clock is for the Cache TTL. Default: the real clock.
	Clock clock.PassiveClock
	// Logger logs watch starts and stops and reads that fall back on the
	// last content seen; never object content. Default: discard.
	Logger logr.Logger
}

func (o *Options) setDefaults() {
	if o.Strategy == "" {
		o.Strategy = v1alpha1.WatchChangeDetectionStrategy
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = DefaultSyncTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
}

// key names one referenced object.
type key struct {
	kind      Kind
	namespace string
	name      string
}

func (k key) ref() klog.ObjectRef { return klog.KRef(k.namespace, k.name) }

// registeredPod is what the store remembers of a registered pod.
type registeredPod struct {
	name types.NamespacedName
	refs References
}

func (p *registeredPod) keys() []key {
	var out []key
	for _, kind := range []Kind{KindConfigMap, KindSecret} {
		for _, name := range p.refs.Names(kind) {
			out = append(out, key{kind: kind, namespace: p.name.Namespace, name: name})
		}
	}
	return out
}

// Store keeps the ConfigMaps and Secrets that registered pods reference.
// It is safe for concurrent use. Create it with New and run Start (a
// controller-runtime Runnable) so that its watches stop with the manager.
type Store struct {
	client kubernetes.Interface
	opts   Options

	// ctx is the parent of every watch; cancel stops them all.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	pods        map[types.UID]*registeredPod
	entries     map[key]*entry
	subscribers map[Kind]map[*subscriber]struct{}
}

// New returns a Store reading through c with the given options. Watches
// start as pods are registered, before Start is called.
func New(c kubernetes.Interface, opts Options) (*Store, error) {
	opts.setDefaults()
	switch opts.Strategy {
	case v1alpha1.WatchChangeDetectionStrategy, v1alpha1.CacheChangeDetectionStrategy, v1alpha1.GetChangeDetectionStrategy:
	default:
		return nil, fmt.Errorf("creating the object store: unknown change detection strategy %q", opts.Strategy)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Store{
		client:      c,
		opts:        opts,
		ctx:         ctx,
		cancel:      cancel,
		pods:        map[types.UID]*registeredPod{},
		entries:     map[key]*entry{},
		subscribers: map[Kind]map[*subscriber]struct{}{},
	}, nil
}

// Start blocks until ctx is done, then stops every watch and waits for them
// to end. It makes the Store a controller-runtime Runnable.
func (s *Store) Start(ctx context.Context) error {
	<-ctx.Done()
	s.cancel()
	s.wg.Wait()
	return nil
}

// NeedLeaderElection is false: a node agent never leader-elects.
func (s *Store) NeedLeaderElection() bool { return false }

// RegisterPod records the objects pod references (see PodReferences). It
// is idempotent and cheap for a pod already registered with the same
// references; references the pod no longer has are released.
func (s *Store) RegisterPod(pod *v1.Pod) {
	p := &registeredPod{name: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, refs: PodReferences(pod)}
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []key
	if prev, ok := s.pods[pod.UID]; ok {
		old = prev.keys()
	}
	s.pods[pod.UID] = p
	now := p.keys()
	for _, k := range now {
		e, ok := s.entries[k]
		if !ok {
			e = s.newEntryLocked(k)
			s.entries[k] = e
		}
		e.pods[pod.UID] = struct{}{}
	}
	for _, k := range old {
		if !slices.Contains(now, k) {
			s.releaseLocked(k, pod.UID)
		}
	}
}

// UnregisterPod releases every object pod referenced; an object no other
// registered pod references is forgotten and its watch stopped. Unknown
// pods are ignored.
func (s *Store) UnregisterPod(pod *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.pods[pod.UID]
	if !ok {
		return
	}
	delete(s.pods, pod.UID)
	for _, k := range prev.keys() {
		s.releaseLocked(k, pod.UID)
	}
}

func (s *Store) releaseLocked(k key, uid types.UID) {
	e, ok := s.entries[k]
	if !ok {
		return
	}
	delete(e.pods, uid)
	if len(e.pods) == 0 {
		delete(s.entries, k)
		e.stopWatch()
	}
}

// GetConfigMap returns the ConfigMap namespace/name, which a registered pod
// must reference (with Watch and Cache). Once the object has been seen, its
// last content is returned even when it was deleted since or the API server
// cannot be reached; an object never seen is a NotFound error.
func (s *Store) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return getAs[*v1.ConfigMap](ctx, s, key{kind: KindConfigMap, namespace: namespace, name: name}, lastSeen)
}

// GetSecret is GetConfigMap for Secrets.
func (s *Store) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return getAs[*v1.Secret](ctx, s, key{kind: KindSecret, namespace: namespace, name: name}, lastSeen)
}

// getAs is get for objects of type T.
func getAs[T client.Object](ctx context.Context, s *Store, k key, mode readMode) (T, error) {
	obj, err := s.get(ctx, k, mode)
	if err != nil {
		var zero T
		return zero, err
	}
	return obj.(T), nil
}

// PodsReferencing returns the registered pods that reference the object of
// kind in namespace/name, sorted: the pods whose volumes a change of that
// object must be written to.
func (s *Store) PodsReferencing(kind Kind, namespace, name string) []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key{kind: kind, namespace: namespace, name: name}]
	if !ok {
		return nil
	}
	out := make([]types.NamespacedName, 0, len(e.pods))
	for uid := range e.pods {
		out = append(out, s.pods[uid].name)
	}
	slices.SortFunc(out, func(a, b types.NamespacedName) int {
		if a.Namespace != b.Namespace {
			if a.Namespace < b.Namespace {
				return -1
			}
			return 1
		}
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// get reads k as mode says (see readMode).
func (s *Store) get(ctx context.Context, k key, mode readMode) (client.Object, error) {
	s.mu.Lock()
	e := s.entries[k]
	s.mu.Unlock()
	if e == nil {
		if s.opts.Strategy != v1alpha1.GetChangeDetectionStrategy {
			return nil, fmt.Errorf("reading %s %s: %w", k.kind, k.ref(), ErrNotRegistered)
		}
		// Get reads any object; without an entry there is nothing to keep.
		return s.fetch(ctx, k)
	}
	switch s.opts.Strategy {
	case v1alpha1.WatchChangeDetectionStrategy:
		if err := e.waitSynced(ctx, s.opts.SyncTimeout); err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", k.kind, k.ref(), err)
		}
	case v1alpha1.CacheChangeDetectionStrategy, v1alpha1.GetChangeDetectionStrategy:
		if err := s.refresh(ctx, e); err != nil {
			return nil, err
		}
	}
	return e.current(mode)
}

// refresh reads e from the API server unless the Cache strategy's copy is
// fresh. A failed read is not an error when content was seen before.
func (s *Store) refresh(ctx context.Context, e *entry) error {
	e.fetchMu.Lock()
	defer e.fetchMu.Unlock()
	now := s.opts.Clock.Now()
	if s.opts.Strategy == v1alpha1.CacheChangeDetectionStrategy && e.isFreshAt(now, s.opts.CacheTTL) {
		return nil
	}
	if e.immutable() {
		// Its content cannot change: read once, as the Watch strategy does.
		return nil
	}
	obj, err := s.fetch(ctx, e.key)
	switch {
	case err == nil:
		s.observe(e, obj)
	case apierrors.IsNotFound(err):
		s.observe(e, nil)
	default:
		if !e.seen() {
			return err
		}
		s.opts.Logger.Error(err, "Unable to read object, using the last content seen",
			"kind", e.key.kind, "object", e.key.ref())
		return nil
	}
	e.setFetched(now)
	return nil
}

// fetch GETs one object.
func (s *Store) fetch(ctx context.Context, k key) (client.Object, error) {
	metrics.ObjectStoreGetRequests.WithLabelValues(k.kind.resource()).Inc()
	var (
		obj client.Object
		err error
	)
	switch k.kind {
	case KindConfigMap:
		obj, err = s.client.CoreV1().ConfigMaps(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	case KindSecret:
		obj, err = s.client.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", k.kind, k.ref(), err)
	}
	return obj, nil
}

// observe records what the API server says of e: obj, or nil when the
// object does not exist. A change to content seen before (an update, a
// deletion, a first appearance after a NotFound) is sent to the sources;
// the first observation is not a change, the registering pod reads it.
func (s *Store) observe(e *entry, obj client.Object) {
	changed, immutable := e.record(obj)
	if immutable && e.stopWatch() {
		s.opts.Logger.V(1).Info("Object is immutable, stopped watching it", "kind", e.key.kind, "object", e.key.ref())
	}
	if changed {
		s.notify(e.key)
	}
}

// notFoundError is the error of an object never seen.
func notFoundError(k key) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: k.kind.resource()}, k.name)
}

// isImmutable says whether obj is a ConfigMap or Secret marked immutable.
func isImmutable(obj client.Object) bool {
	switch o := obj.(type) {
	case *v1.ConfigMap:
		return o.Immutable != nil && *o.Immutable
	case *v1.Secret:
		return o.Immutable != nil && *o.Immutable
	}
	return false
}

// Reader adapts a Store to the executor's ObjectReader, and to the
// ConfigMap and Secret methods of the volume manager's Fetcher.
type Reader struct {
	s    *Store
	mode readMode
}

// Reader returns the store as a ConfigMap/Secret reader that, like
// GetConfigMap and GetSecret, returns the last content seen of a deleted
// object.
func (s *Store) Reader() Reader { return Reader{s: s, mode: lastSeen} }

// ExistingReader returns the store as a ConfigMap/Secret reader for which
// an object the API server last reported deleted is a NotFound error, as
// for the kubelet's ConfigMap and Secret managers: what volumes read, so
// that an optional source's files go when its object is deleted and come
// back when it is created again, while a required source's update fails
// and its volume keeps its files; and what container environments and pull
// secrets read. A read the API server cannot answer still returns the last
// content seen.
func (s *Store) ExistingReader() Reader { return Reader{s: s, mode: existing} }

// ConfigMap reads a ConfigMap as the reader's mode says.
func (r Reader) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return getAs[*v1.ConfigMap](ctx, r.s, key{kind: KindConfigMap, namespace: namespace, name: name}, r.mode)
}

// Secret reads a Secret as the reader's mode says.
func (r Reader) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return getAs[*v1.Secret](ctx, r.s, key{kind: KindSecret, namespace: namespace, name: name}, r.mode)
}
