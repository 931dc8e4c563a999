package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// Health serves /healthz and /readyz from the start, before the manager
// starts (which waits for the API server): a node that runs its own
// control plane is healthy while it starts it, and tools such as kubeadm
// wait for that before they wait for the API server.
type Health struct {
	addr string

	mu      sync.Mutex
	healthz map[string]healthz.Checker
	readyz  map[string]healthz.Checker
}

// NewHealth returns the probes of addr ("0" or "": none are served).
func NewHealth(addr string) *Health {
	return &Health{addr: addr, healthz: map[string]healthz.Checker{}, readyz: map[string]healthz.Checker{}}
}

// AddHealthzCheck adds a check of /healthz.
func (h *Health) AddHealthzCheck(name string, check healthz.Checker) error {
	return h.add(h.healthz, name, check)
}

// AddReadyzCheck adds a check of /readyz.
func (h *Health) AddReadyzCheck(name string, check healthz.Checker) error {
	return h.add(h.readyz, name, check)
}

func (h *Health) add(checks map[string]healthz.Checker, name string, check healthz.Checker) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := checks[name]; ok {
		return fmt.Errorf("health check %q added twice", name)
	}
	checks[name] = check
	return nil
}

// Start serves the probes until ctx ends.
func (h *Health) Start(ctx context.Context) error {
	if h.addr == "" || h.addr == "0" {
		<-ctx.Done()
		return nil
	}
	h.mu.Lock()
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.StripPrefix("/healthz", &healthz.Handler{Checks: h.healthz}))
	mux.Handle("/healthz/", http.StripPrefix("/healthz", &healthz.Handler{Checks: h.healthz}))
	mux.Handle("/readyz", http.StripPrefix("/readyz", &healthz.Handler{Checks: h.readyz}))
	mux.Handle("/readyz/", http.StripPrefix("/readyz", &healthz.Handler{Checks: h.readyz}))
	h.mu.Unlock()
	ln, err := net.Listen("tcp", h.addr)
	if err != nil {
		return fmt.Errorf("serving health probes on %s: %w", h.addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving health probes: %w", err)
	}
	return nil
}

// withHealth is the manager nodelet runs: its health checks are served by
// Health, from the start, not by the manager once it starts.
type withHealth struct {
	ctrl.Manager
	health *Health
	// events, for a standalone node (no API server configured), log the
	// events instead: the manager is never started.
	events record.EventBroadcaster
	// sink sends the Events of a node with an API server.
	sink *eventSink
}

// GetEventRecorderFor returns a recorder of core/v1 Events (those kubectl
// describe shows) that sends them to the API server, or on a standalone
// node one that logs them.
func (m *withHealth) GetEventRecorderFor(name string) record.EventRecorder {
	if m.events != nil {
		return m.events.NewRecorder(m.GetScheme(), corev1.EventSource{Component: name})
	}
	if m.sink != nil {
		return m.sink.broadcaster(m.Manager).NewRecorder(m.GetScheme(), corev1.EventSource{Component: name})
	}
	return m.Manager.GetEventRecorderFor(name) //nolint:staticcheck // the core/v1 events kubectl describe shows
}

// Start runs the manager until ctx ends, then stops sending Events.
func (m *withHealth) Start(ctx context.Context) error {
	err := m.Manager.Start(ctx)
	if m.sink != nil {
		m.sink.shutdown()
	}
	return err
}

// Standalone reports whether mgr is a standalone node's: never started.
func Standalone(mgr ctrl.Manager) bool {
	m, ok := mgr.(*withHealth)
	return ok && m.events != nil
}

func (m *withHealth) AddHealthzCheck(name string, check healthz.Checker) error {
	return m.health.AddHealthzCheck(name, check)
}

func (m *withHealth) AddReadyzCheck(name string, check healthz.Checker) error {
	return m.health.AddReadyzCheck(name, check)
}

// HealthOf returns the probes of a manager made by NewManager.
func HealthOf(mgr ctrl.Manager) *Health {
	if m, ok := mgr.(*withHealth); ok {
		return m.health
	}
	return nil
}
