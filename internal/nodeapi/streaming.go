package nodeapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubetypes "k8s.io/kubelet/pkg/types"
	utilexec "k8s.io/utils/exec"
)

// StreamOptions are the stream flags of exec and attach, in the kubelet's
// query parameters (corev1.ExecStdinParam, ...).
type StreamOptions struct {
	Stdin, Stdout, Stderr, TTY bool
}

// ParseStreamOptions reads input, output, error and tty ("1" or "true").
// At least one stream is required; with a TTY, stderr is merged into
// stdout, as the kubelet does.
func ParseStreamOptions(q url.Values) (StreamOptions, error) {
	flag := func(name string) bool {
		v := q.Get(name)
		return v == "1" || strings.EqualFold(v, "true")
	}
	o := StreamOptions{
		Stdin:  flag(corev1.ExecStdinParam),
		Stdout: flag(corev1.ExecStdoutParam),
		Stderr: flag(corev1.ExecStderrParam),
		TTY:    flag(corev1.ExecTTYParam),
	}
	if o.TTY {
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, badRequest("you must specify at least one of stdin, stdout, stderr")
	}
	return o, nil
}

// runningContainerID finds the running container name of pod in the runtime.
func (s *Server) runningContainerID(ctx context.Context, pod *corev1.Pod, uid, name string) (string, error) {
	if uid != "" && uid != string(pod.UID) {
		return "", fmt.Errorf("%w: pod %s/%s with UID %s", errNotFound, pod.Namespace, pod.Name, uid)
	}
	if !hasContainer(pod, name) {
		return "", fmt.Errorf("%w: container %q in pod %q", errNotFound, name, pod.Name)
	}
	found, err := s.opts.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{
			kubetypes.KubernetesPodUIDLabel:        string(pod.UID),
			kubetypes.KubernetesContainerNameLabel: name,
		},
	})
	if err != nil {
		return "", fmt.Errorf("finding container %q of pod %q: %w", name, pod.Name, err)
	}
	if len(found) == 0 {
		return "", badRequest("container %q in pod %q is not running", name, pod.Name)
	}
	// The newest one, should an old one still be stopping.
	newest := slices.MaxFunc(found, func(a, b *runtimeapi.Container) int {
		return int(a.GetCreatedAt() - b.GetCreatedAt())
	})
	return newest.GetId(), nil
}

// readySandboxID finds the pod's ready sandbox in the runtime.
func (s *Server) readySandboxID(ctx context.Context, pod *corev1.Pod, uid string) (string, error) {
	if uid != "" && uid != string(pod.UID) {
		return "", fmt.Errorf("%w: pod %s/%s with UID %s", errNotFound, pod.Namespace, pod.Name, uid)
	}
	found, err := s.opts.Runtime.ListPodSandboxes(ctx, &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{kubetypes.KubernetesPodUIDLabel: string(pod.UID)},
	})
	if err != nil {
		return "", fmt.Errorf("finding the sandbox of pod %q: %w", pod.Name, err)
	}
	if len(found) == 0 {
		return "", badRequest("pod %q has no running sandbox", pod.Name)
	}
	newest := slices.MaxFunc(found, func(a, b *runtimeapi.PodSandbox) int {
		return int(a.GetCreatedAt() - b.GetCreatedAt())
	})
	return newest.GetId(), nil
}

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cmd := r.URL.Query()[corev1.ExecCommandParam]
	if len(cmd) == 0 {
		s.writeError(w, r, badRequest("you must specify a command"))
		return
	}
	id, err := s.streamContainer(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp, err := s.opts.Runtime.Exec(ctx, &runtimeapi.ExecRequest{
		ContainerId: id, Cmd: cmd, Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	opts, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id, err := s.streamContainer(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp, err := s.opts.Runtime.Attach(ctx, &runtimeapi.AttachRequest{
		ContainerId: id, Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pod, err := s.pod(ctx, r.PathValue("namespace"), r.PathValue("pod"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// SPDY clients name the ports per stream; WebSocket clients in the
	// query. Either way the runtime's streaming server reads them again.
	var ports []int32
	for _, p := range r.URL.Query()[corev1.PortHeader] {
		for _, one := range strings.Split(p, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(one), 10, 16)
			if err != nil || n == 0 {
				s.writeError(w, r, badRequest("port %q is not a valid port", one))
				return
			}
			ports = append(ports, int32(n))
		}
	}
	sandbox, err := s.readySandboxID(ctx, pod, r.PathValue("uid"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	resp, err := s.opts.Runtime.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: ports})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

// serveRun runs a command and answers with its output: the kubelet's /run.
func (s *Server) serveRun(w http.ResponseWriter, r *http.Request) {
	cmd := strings.Fields(r.FormValue("cmd"))
	// The form is read: the command may run longer than the body's
	// deadline, which would end its request.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	if len(cmd) == 0 {
		s.writeError(w, r, badRequest("you must specify a command in cmd"))
		return
	}
	id, err := s.streamContainer(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	stdout, stderr, err := s.opts.Runtime.ExecSync(r.Context(), id, cmd, 0)
	if exitErr := utilexec.ExitError(nil); errors.As(err, &exitErr) {
		// As the kubelet: a command that failed is a 500 with its error,
		// which carries its exit code and stderr, not its output.
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(append(stdout, stderr...))
}

// streamContainer resolves the {namespace}/{pod}[/{uid}]/{container} of an
// exec, attach or run to a running container's ID.
func (s *Server) streamContainer(r *http.Request) (string, error) {
	pod, err := s.pod(r.Context(), r.PathValue("namespace"), r.PathValue("pod"))
	if err != nil {
		return "", err
	}
	return s.runningContainerID(r.Context(), pod, r.PathValue("uid"), r.PathValue("container"))
}

// proxyStream hands the client's upgrade request to the runtime's
// streaming server at rawURL and copies the upgraded connection both ways.
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, rawURL string) {
	u, err := url.Parse(rawURL)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("parsing the runtime's streaming URL: %w", err))
		return
	}
	h := proxy.NewUpgradeAwareHandler(u, nil, false, true, streamResponder{s})
	if isUpgradeRequest(r) {
		// The hijacked connection carries the session both ways: traffic
		// in either direction keeps it, none for StreamIdleTimeout ends it.
		w = &idleHijacker{ResponseWriter: w, timeout: s.opts.StreamIdleTimeout, onIdle: func() {
			s.log.V(1).Info("Closed an idle streaming session", "path", r.URL.Path, "timeout", s.opts.StreamIdleTimeout)
		}}
	}
	h.ServeHTTP(w, r)
}

// isUpgradeRequest reports whether r asks to switch protocols, as the
// upgrade-aware proxy decides it: a Connection header naming upgrade.
func isUpgradeRequest(r *http.Request) bool {
	for _, h := range r.Header[http.CanonicalHeaderKey("Connection")] {
		if strings.Contains(strings.ToLower(h), "upgrade") {
			return true
		}
	}
	return false
}

// idleHijacker hands out its connection, once hijacked, wrapped in an
// idleConn.
type idleHijacker struct {
	http.ResponseWriter
	timeout time.Duration
	onIdle  func()
}

func (h *idleHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return newIdleConn(conn, h.timeout, h.onIdle), rw, nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (h *idleHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// idleConn closes a connection that neither read nor wrote for timeout.
type idleConn struct {
	net.Conn
	timeout time.Duration
	onIdle  func()
	// last is when bytes last went through, in Unix nanoseconds.
	last      atomic.Int64
	closed    chan struct{}
	closeOnce sync.Once
}

func newIdleConn(conn net.Conn, timeout time.Duration, onIdle func()) *idleConn {
	c := &idleConn{Conn: conn, timeout: timeout, onIdle: onIdle, closed: make(chan struct{})}
	c.touch()
	go c.watch()
	return c
}

func (c *idleConn) touch() { c.last.Store(time.Now().UnixNano()) }

func (c *idleConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *idleConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *idleConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// watch closes the connection once it was idle for the timeout.
func (c *idleConn) watch() {
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		idle := time.Since(time.Unix(0, c.last.Load()))
		if idle >= c.timeout {
			if c.onIdle != nil {
				c.onIdle()
			}
			_ = c.Close()
			return
		}
		t.Reset(c.timeout - idle)
	}
}

type streamResponder struct{ s *Server }

// Error answers a request the proxy could not serve: with the status of an
// API status error (a request that is no upgrade is a 400), else a 500 for
// a runtime's streaming server that failed.
func (sr streamResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	if status := apierrors.APIStatus(nil); errors.As(err, &status) && status.Status().Code >= 400 && status.Status().Code < 500 {
		http.Error(w, err.Error(), int(status.Status().Code))
		return
	}
	sr.s.log.Error(err, "Unable to proxy a stream to the runtime", "path", r.URL.Path)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
