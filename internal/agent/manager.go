package agent

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// NewScheme returns the scheme nodelet's clients use: the built-in API
// types and the configuration API.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// CacheOptions scopes the cache to one node: only the pods bound to it and
// only its own Node object, with managedFields stripped, and the
// RuntimeClasses (cluster-scoped, few, and readable by every node) that
// give pods their runtime handler. A read of any other type through the
// cached client fails instead of starting an informer.
func CacheOptions(nodeName string) cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:          {Field: fields.OneTermEqualSelector("spec.nodeName", nodeName)},
			&corev1.Node{}:         {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
			&nodev1.RuntimeClass{}: {},
		},
		DefaultTransform:            cache.TransformStripManagedFields(),
		ReaderFailOnMissingInformer: true,
	}
}

// NewManager builds the manager for cfg, which must be defaulted and valid.
func NewManager(restCfg *rest.Config, cfg *v1alpha1.NodeletConfiguration) (ctrl.Manager, error) {
	restCfg = rest.CopyConfig(restCfg)
	if restCfg.ContentType == "" {
		// As the kubelet: built-in kinds, all nodelet reads and writes,
		// travel as protobuf, which costs a fraction of JSON's CPU and
		// garbage to encode and decode. The manager's own clients do so
		// already; this takes the Events and every clientset made from
		// the manager's configuration along.
		restCfg.ContentType = runtime.ContentTypeProtobuf
		restCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	if cfg.KubeAPIQPS != nil {
		restCfg.QPS = *cfg.KubeAPIQPS
	}
	if cfg.KubeAPIBurst > 0 {
		restCfg.Burst = int(cfg.KubeAPIBurst)
	}
	// The metrics address has no authentication: /configz (which holds
	// staticPodURLHeader) is served on the node API alone, and pprof only
	// here when the address is a loopback one (the node API serves it too,
	// to those allowed nodes/proxy).
	extra := map[string]http.Handler{}
	if cfg.EnableProfilingHandler && IsLoopbackAddress(cfg.MetricsBindAddress) {
		extra["/debug/pprof/"] = http.HandlerFunc(pprof.Index)
		extra["/debug/pprof/cmdline"] = http.HandlerFunc(pprof.Cmdline)
		extra["/debug/pprof/profile"] = http.HandlerFunc(pprof.Profile)
		extra["/debug/pprof/symbol"] = http.HandlerFunc(pprof.Symbol)
		extra["/debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
	}
	shutdown := 30 * time.Second
	scheme := NewScheme()
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme: scheme,
		// Built-in kinds are mapped without discovery: the manager and its
		// informers are made before the API server may be reachable.
		MapperProvider: newMapper(scheme),
		Cache:          CacheOptions(cfg.NodeName),
		Client: client.Options{Cache: &client.CacheOptions{
			// The Node authorizer lets a node read only the objects its
			// pods name, and leases never by list: read these directly.
			DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &coordinationv1.Lease{}},
		}},
		LeaderElection: false,
		// Served by Health, from the start (see Run).
		HealthProbeBindAddress:  "0",
		GracefulShutdownTimeout: &shutdown,
		Metrics: metricsserver.Options{
			BindAddress:   cfg.MetricsBindAddress,
			ExtraHandlers: extra,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager for node %s: %w", cfg.NodeName, err)
	}
	m := &withHealth{Manager: mgr, health: NewHealth(cfg.HealthzBindAddress), sink: &eventSink{entries: eventCacheEntries(cfg.MaxPods)}}
	if err := m.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding healthz check: %w", err)
	}
	if err := m.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding readyz check: %w", err)
	}
	return m, nil
}

// standaloneHost is where the clients of a standalone node point: nowhere
// (the manager that would use them never starts).
const standaloneHost = "https://127.0.0.1:1"

// standaloneEventVerbosity is the log verbosity of a standalone node's
// events.
const standaloneEventVerbosity = 2

// NewStandaloneManager builds the manager of a node with no API server
// configured, which runs its static pods only: Run never starts it, and
// its events are logged.
func NewStandaloneManager(cfg *v1alpha1.NodeletConfiguration) (ctrl.Manager, error) {
	mgr, err := NewManager(&rest.Config{Host: standaloneHost}, cfg)
	if err != nil {
		return nil, err
	}
	m := mgr.(*withHealth)
	m.events = record.NewBroadcaster()
	m.events.StartStructuredLogging(standaloneEventVerbosity)
	return m, nil
}

// IsLoopbackAddress reports whether a host:port address listens on a
// loopback IP or on "localhost" only.
func IsLoopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ConfigzHandler serves cfg as the kubelet serves its configz: a JSON object
// whose one key holds the versioned configuration.
func ConfigzHandler(cfg *v1alpha1.NodeletConfiguration) (http.Handler, error) {
	body, err := json.Marshal(map[string]any{"nodeletconfig": cfg})
	if err != nil {
		return nil, fmt.Errorf("encoding configz: %w", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET is allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}), nil
}
