package nodeapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/stats"
)

// errNotFound marks a pod or container this node does not run (404).
var errNotFound = errors.New("not found")

// DefaultIdleTimeout is how long a connection without a request in flight
// is kept.
const DefaultIdleTimeout = 2 * time.Minute

// maxReadHeaderTimeout bounds the time from a connection's accept, or the
// end of its last response, to the end of a request's headers.
const maxReadHeaderTimeout = 30 * time.Second

// Options are what a Server is built from.
type Options struct {
	// Address and Port to listen on.
	Address string
	Port    int32
	// TLS is the serving configuration (TLSConfig).
	TLS *tls.Config
	// ReadOnly serves, in plain HTTP and to anyone, only what the
	// kubelet's read-only port serves: /healthz, /pods, /metrics,
	// /metrics/probes, /metrics/resource, /metrics/cadvisor and GET
	// /stats/summary. TLS, the
	// Authenticator and the Authorizer are not used.
	ReadOnly bool
	// Authenticator and Authorizer guard every request.
	Authenticator *Authenticator
	Authorizer    *Authorizer
	// NodeName is the node served.
	NodeName string
	// Pods reads the pods bound to the node (the node-scoped cache).
	Pods client.Reader
	// Runtime is the container runtime.
	Runtime cri.Runtime
	// Stats builds /stats/summary and /metrics/resource.
	Stats *stats.Provider
	// Metrics is served on /metrics, and its prober families on
	// /metrics/probes.
	Metrics prometheus.Gatherer
	// Configz serves /configz.
	Configz http.Handler
	// CheckpointDir, when set, is where /checkpoint has the runtime write
	// container checkpoints (made 0700); unset, /checkpoint is not served.
	CheckpointDir string
	// Profiling serves Go's /debug/pprof handlers (authorized as
	// nodes/proxy, as the kubelet's).
	Profiling bool
	// StreamIdleTimeout ends a streaming session without traffic; zero
	// means 4 hours, as the kubelet's default.
	StreamIdleTimeout time.Duration
	// IdleTimeout closes a connection with no request in flight; zero
	// means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Clock is time for the handlers; nil means the real clock.
	Clock clock.PassiveClock
}

// Server is the node API server, a controller-runtime Runnable.
type Server struct {
	opts    Options
	handler http.Handler
	log     logr.Logger

	// listener is set by Listen, or by Start when Listen was not called.
	listener net.Listener
}

// New returns a Server; it listens when started.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.StreamIdleTimeout == 0 {
		opts.StreamIdleTimeout = 4 * time.Hour
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	s := &Server{opts: opts, log: log.Log.WithName("server")}
	s.handler = s.routes()
	return s
}

// Handler returns the server's authenticated and authorized handler.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) routes() http.Handler {
	if s.opts.ReadOnly {
		return s.readOnlyRoutes()
	}
	mux := http.NewServeMux()
	s.readRoutes(mux)
	if s.opts.Stats != nil {
		mux.HandleFunc("POST /stats/summary", s.serveSummary)
	}
	if s.opts.Configz != nil {
		mux.Handle("GET /configz", s.opts.Configz)
	}

	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.serveContainerLogs)

	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", getOrPost(s.serveExec))
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", getOrPost(s.serveExec))
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", getOrPost(s.serveAttach))
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", getOrPost(s.serveAttach))
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", getOrPost(s.servePortForward))
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", getOrPost(s.servePortForward))
	}
	mux.HandleFunc("POST /run/{namespace}/{pod}/{container}", s.serveRun)
	mux.HandleFunc("POST /run/{namespace}/{pod}/{uid}/{container}", s.serveRun)
	if s.opts.CheckpointDir != "" {
		mux.HandleFunc("POST /checkpoint/{namespace}/{pod}/{container}", s.serveCheckpoint)
	}
	if s.opts.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return s.withAuth(mux)
}

// readRoutes adds the routes that only read: the read-only port's.
func (s *Server) readRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /pods", s.servePods)
	mux.HandleFunc("GET /pods/{$}", s.servePods)
	if s.opts.Metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Metrics, promhttp.HandlerOpts{}))
		mux.Handle("GET /metrics/probes", promhttp.HandlerFor(proberGatherer{s.opts.Metrics}, promhttp.HandlerOpts{}))
	}
	if s.opts.Stats != nil {
		mux.HandleFunc("GET /stats/summary", s.serveSummary)
		mux.Handle("GET /metrics/resource", promhttp.HandlerFor(s.opts.Stats.ResourceRegistry(), promhttp.HandlerOpts{}))
		mux.Handle("GET /metrics/cadvisor", promhttp.HandlerFor(s.opts.Stats.CadvisorRegistry(), promhttp.HandlerOpts{}))
	}
}

// readOnlyRoutes are the read-only port's: the routes that only read,
// without authentication, as the kubelet's readOnlyPort serves them.
func (s *Server) readOnlyRoutes() http.Handler {
	mux := http.NewServeMux()
	s.readRoutes(mux)
	return mux
}

// getOrPost serves only GET and POST: a GET route also matches HEAD, which
// must not start a stream.
func getOrPost(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		h(w, r)
	}
}

// withAuth authenticates and authorizes every request before next sees it.
func (s *Server) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			// A body announced and not sent would hold the connection:
			// what a handler does not read is read after its answer, with
			// no deadline but this one. /run clears it once it has read
			// its form; the other handlers read no body.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.IdleTimeout))
		}
		u, err := s.opts.Authenticator.Authenticate(r)
		if errors.Is(err, errTooManyReviews) {
			s.log.V(1).Info("Refused a token review over the rate limit", "path", r.URL.Path)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "Too many requests, please try again later", http.StatusTooManyRequests)
			return
		}
		if err != nil {
			if !errors.Is(err, errUnauthenticated) {
				s.log.Error(err, "Unable to authenticate a request", "path", r.URL.Path)
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := RequestAttributes(r.Method, r.URL.Path)
		ok, sub, err := s.opts.Authorizer.Authorize(r.Context(), u, attrs)
		if err != nil {
			s.log.Error(err, "Unable to authorize a request", "user", u.Name, "path", r.URL.Path)
			http.Error(w, "Authorization error (user="+u.Name+", verb="+attrs.Verb+", resource=nodes, subresource="+sub+")",
				http.StatusInternalServerError)
			return
		}
		if !ok {
			s.log.V(1).Info("Forbidden request", "user", u.Name, "verb", attrs.Verb, "subresource", sub, "path", r.URL.Path)
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, attrs.Verb, attrs.Subresources),
				http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Listen opens the server's socket; Start calls it when it was not called.
// It lets a caller learn the port before Start when Port is 0.
func (s *Server) Listen() error {
	if s.listener != nil {
		return nil
	}
	addr := net.JoinHostPort(s.opts.Address, strconv.Itoa(int(s.opts.Port)))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	s.listener = l
	return nil
}

// Addr is the address listened on, once Listen was called.
func (s *Server) Addr() net.Addr {
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// Start serves until ctx is done; it implements manager.Runnable.
func (s *Server) Start(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	srv := &http.Server{
		Handler:   s.handler,
		TLSConfig: s.opts.TLS,
		// The header timeout also bounds the TLS handshake and the wait
		// for a connection's first request: a client that connects and
		// says nothing is idle too.
		ReadHeaderTimeout: min(maxReadHeaderTimeout, s.opts.IdleTimeout),
		IdleTimeout:       s.opts.IdleTimeout,
		ErrorLog:          nil,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errs := make(chan error, 1)
	go func() {
		if s.opts.ReadOnly {
			s.log.Info("Serving the node API's read-only port, without authentication", "address", s.listener.Addr().String())
			errs <- srv.Serve(s.listener)
			return
		}
		s.log.Info("Serving the node API", "address", s.listener.Addr().String())
		errs <- srv.ServeTLS(s.listener, "", "")
	}()
	select {
	case err := <-errs:
		return fmt.Errorf("serving the node API: %w", err)
	case <-ctx.Done():
	}
	// Followed logs and streams last as long as their clients: give them a
	// moment, then cut them.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// node serves its own API.
func (s *Server) NeedLeaderElection() bool { return false }

// pod reads a pod bound to this node.
func (s *Server) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := s.opts.Pods.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: pod %q", errNotFound, klog.KRef(namespace, name))
		}
		return nil, fmt.Errorf("reading pod %s: %w", klog.KRef(namespace, name), err)
	}
	if pod.Spec.NodeName != s.opts.NodeName {
		return nil, fmt.Errorf("%w: pod %q", errNotFound, klog.KRef(namespace, name))
	}
	return pod, nil
}

// writeError answers with the status err calls for.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errBadRequest):
		code = http.StatusBadRequest
	case errors.Is(err, errNotFound), cri.IsNotFound(err):
		code = http.StatusNotFound
	default:
		s.log.Error(err, "Unable to serve a request", "path", r.URL.Path)
	}
	http.Error(w, err.Error(), code)
}

func (s *Server) servePods(w http.ResponseWriter, r *http.Request) {
	list := &corev1.PodList{}
	if err := s.opts.Pods.List(r.Context(), list); err != nil {
		s.writeError(w, r, fmt.Errorf("listing pods: %w", err))
		return
	}
	out := &corev1.PodList{}
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == s.opts.NodeName {
			out.Items = append(out.Items, list.Items[i])
		}
	}
	out.Kind, out.APIVersion = "PodList", "v1"
	writeJSON(w, out)
}

func (s *Server) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req, err := ParseLogRequest(r.URL.Query(), s.opts.Clock.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pod, err := s.pod(ctx, r.PathValue("namespace"), r.PathValue("pod"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := s.logContainerID(ctx, pod, r.PathValue("container"), req.Previous)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	st, err := s.opts.Runtime.ContainerStatus(ctx, id)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("finding the log of container %q: %w", r.PathValue("container"), err))
		return
	}
	if st.GetLogPath() == "" {
		s.writeError(w, r, badRequest("container %q in pod %q has no log file", r.PathValue("container"), pod.Name))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	// A followed log goes out line by line; a read to the end in large
	// writes, as the reader writes one line at a time.
	fw := &flushWriter{w: w}
	var out io.Writer = fw
	var buf *bufio.Writer
	if req.Options.Follow {
		fw.flusher, _ = w.(http.Flusher)
	} else {
		buf = bufio.NewWriterSize(fw, logBufferSize)
		out = buf
	}
	err = s.opts.Runtime.ReadLogs(ctx, st.GetLogPath(), id, &req.Options, out, out)
	wrote := fw.wrote || (buf != nil && buf.Buffered() > 0)
	if buf != nil {
		_ = buf.Flush() // a failed write means the client went away
	}
	if wrote {
		// Sent chunked, never with a Content-Length, as the kubelet does:
		// the API server's websocket log stream drops the data of a read
		// that also returns EOF, which a body with a length ends with.
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return // the client went away
		}
		if !wrote {
			s.writeError(w, r, err)
			return
		}
		s.log.Error(err, "Unable to read a container log to the end", "pod", klog.KObj(pod), "container", r.PathValue("container"))
	}
}

// logBufferSize is the write size of a log read to the end.
const logBufferSize = 64 << 10
