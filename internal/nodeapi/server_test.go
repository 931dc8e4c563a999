package nodeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fake "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/nodeapi/nodeapitest"
	"github.com/nodelet/nodelet/internal/stats/statstest"
)

// recordingRuntime is the CRI fake that also keeps the streaming requests
// it was asked to prepare, answers them with a URL on a streaming server of
// the test's, and gives ExecSync an output.
type recordingRuntime struct {
	*fake.FakeRuntimeService

	streamURL string

	mu        sync.Mutex
	execs     []*runtimeapi.ExecRequest
	attaches  []*runtimeapi.AttachRequest
	forwards  []*runtimeapi.PortForwardRequest
	execSyncs []string // container ID and command, space-separated

	syncStdout, syncStderr []byte
	syncErr                error
}

func (r *recordingRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if _, err := r.FakeRuntimeService.Exec(ctx, req); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execs = append(r.execs, req)
	return &runtimeapi.ExecResponse{Url: r.streamURL + "/exec/session"}, nil
}

func (r *recordingRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if _, err := r.FakeRuntimeService.Attach(ctx, req); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attaches = append(r.attaches, req)
	return &runtimeapi.AttachResponse{Url: r.streamURL + "/attach/session"}, nil
}

func (r *recordingRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if _, err := r.FakeRuntimeService.PortForward(ctx, req); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forwards = append(r.forwards, req)
	return &runtimeapi.PortForwardResponse{Url: r.streamURL + "/portforward/session"}, nil
}

func (r *recordingRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	if _, _, err := r.FakeRuntimeService.ExecSync(ctx, id, cmd, timeout); err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execSyncs = append(r.execSyncs, id+" "+strings.Join(cmd, " "))
	return r.syncStdout, r.syncStderr, r.syncErr
}

// fakeStreamSession is a session of the runtime's streaming server: it
// says what it was asked for, then echoes one line.
func fakeStreamSession(r *http.Request, buf *bufio.ReadWriter) {
	_, _ = fmt.Fprintf(buf, "runtime stream %s %s\n", r.Method, r.URL.Path)
	_ = buf.Flush()
	line, err := buf.ReadString('\n')
	if err != nil {
		return
	}
	_, _ = fmt.Fprintf(buf, "echo %s", line)
	_ = buf.Flush()
}

// The node API's fixture: pod "web" (UID uid-web) runs on this node with
// containers "app" (running, restarted once), "sidecar" (crash looping),
// "nolog" (running, no log file), init container "init" (done) and
// ephemeral container "debug" (exited); pod "elsewhere" is another
// node's. Each container's log file holds a line that names it.
const (
	apiNode = statstest.NodeName
	webUID  = "uid-web"
)

type apiFixture struct {
	*nodeapitest.Runtime
	t     *testing.T
	rs    *recordingRuntime
	clock *clocktesting.FakePassiveClock
	// sandbox is web's ready sandbox; ids are the containers by role:
	// app, app-old, sidecar-old, nolog, init, debug.
	sandbox string
	ids     map[string]string
	web     *corev1.Pod
	// pods is the pod reader; podsErr makes it fail.
	pods    client.Client
	podsErr error
	// stream records what the runtime's streaming server was asked.
	stream *httptest.Server
	opts   Options
}

func newAPIFixture(t *testing.T) *apiFixture {
	t.Helper()
	f := &apiFixture{t: t, ids: map[string]string{},
		clock: clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	f.stream = nodeapitest.StreamServer(t, fakeStreamSession)
	f.rs = &recordingRuntime{FakeRuntimeService: fake.NewFakeRuntimeService(), streamURL: f.stream.URL}
	f.Runtime = nodeapitest.NewRuntime(t, apiNode, f.rs, f.rs.FakeRuntimeService)
	f.sandbox = f.RunSandbox(webUID, "web")

	f.ids["app-old"] = f.Container(f.sandbox, webUID, "app", 0, false, "app's first run")
	f.ids["app"] = f.Container(f.sandbox, webUID, "app", 1, true, "app's second run")
	f.ids["sidecar-old"] = f.Container(f.sandbox, webUID, "sidecar", 0, false, "sidecar crashed")
	f.ids["nolog"] = f.Container(f.sandbox, webUID, "nolog", 0, true, "")
	f.ids["init"] = f.Container(f.sandbox, webUID, "init", 0, false, "init done")
	f.ids["debug"] = f.Container(f.sandbox, webUID, "debug", 0, false, "debugged")

	running := func(name, id string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, ContainerID: "containerd://" + id,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	}
	terminated := func(id string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ContainerID: "containerd://" + id}
	}
	app := running("app", f.ids["app"])
	app.LastTerminationState.Terminated = terminated(f.ids["app-old"])
	sidecar := corev1.ContainerStatus{Name: "sidecar",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: terminated(f.ids["sidecar-old"])}}
	f.web = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: webUID},
		Spec: corev1.PodSpec{
			NodeName:       apiNode,
			InitContainers: []corev1.Container{{Name: "init"}},
			Containers:     []corev1.Container{{Name: "app"}, {Name: "sidecar"}, {Name: "nolog"}, {Name: "pending"}},
			EphemeralContainers: []corev1.EphemeralContainer{{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}},
		},
		Status: corev1.PodStatus{
			Phase:                 corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Terminated: terminated(f.ids["init"])}}},
			ContainerStatuses:     []corev1.ContainerStatus{app, sidecar, running("nolog", f.ids["nolog"])},
			EphemeralContainerStatuses: []corev1.ContainerStatus{{Name: "debug",
				State: corev1.ContainerState{Terminated: terminated(f.ids["debug"])}}},
		},
	}
	elsewhere := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: "ns", UID: "uid-elsewhere"},
		Spec:       corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "app"}}},
	}
	f.pods = fakeclient.NewClientBuilder().WithObjects(f.web, elsewhere).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if f.podsErr != nil {
				return f.podsErr
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if f.podsErr != nil {
				return f.podsErr
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	f.opts = Options{
		NodeName:      apiNode,
		Authenticator: NewAuthenticator(Authenticator{Anonymous: true}),
		Authorizer:    NewAuthorizer(Authorizer{NodeName: apiNode}),
		Pods:          f.pods,
		Runtime:       f.Client,
		Clock:         f.clock,
	}
	return f
}

// server builds the Server from the fixture's options as they are now.
func (f *apiFixture) server() *Server { return New(f.opts) }

// do serves one request with the fixture's server and returns the answer.
func (f *apiFixture) do(method, target string) *httptest.ResponseRecorder {
	f.t.Helper()
	return f.serve(httptest.NewRequest(method, target, http.NoBody))
}

func (f *apiFixture) serve(r *http.Request) *httptest.ResponseRecorder {
	f.t.Helper()
	w := httptest.NewRecorder()
	f.server().Handler().ServeHTTP(w, r)
	return w
}

func TestRoutes(t *testing.T) {
	f := newAPIFixture(t)
	f.opts.Configz = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"kubeletconfig":{}}`)) })
	for _, tc := range []struct {
		method, path string
		code         int
		body         string // a part of the body, when not empty
	}{
		{"GET", "/healthz", http.StatusOK, "ok"},
		{"HEAD", "/healthz", http.StatusOK, ""},
		{"POST", "/healthz", http.StatusMethodNotAllowed, ""},
		{"GET", "/", http.StatusNotFound, ""},
		{"GET", "/nothing/here", http.StatusNotFound, ""},
		{"GET", "/healthz/extra", http.StatusNotFound, ""},
		{"GET", "/configz", http.StatusOK, `{"kubeletconfig":{}}`},
		{"POST", "/configz", http.StatusMethodNotAllowed, ""},
		{"GET", "/pods", http.StatusOK, `"kind":"PodList"`},
		{"GET", "/pods/", http.StatusOK, `"kind":"PodList"`},
		{"GET", "/pods/web", http.StatusNotFound, ""},
		{"DELETE", "/pods", http.StatusMethodNotAllowed, ""},
		// Not configured here: no stats provider, no metrics registry.
		{"GET", "/stats/summary", http.StatusNotFound, ""},
		{"GET", "/metrics", http.StatusNotFound, ""},
		{"GET", "/metrics/resource", http.StatusNotFound, ""},
		// The kubelet's node logs, checkpoints and debugging handlers
		// are not served.
		{"GET", "/logs/", http.StatusNotFound, ""},
		{"POST", "/checkpoint/ns/web/app", http.StatusNotFound, ""},
		{"GET", "/debug/pprof/", http.StatusNotFound, ""},
		// A log needs namespace, pod and container, and nothing more.
		{"GET", "/containerLogs/ns/web", http.StatusNotFound, ""},
		{"GET", "/containerLogs/ns/web/app/extra", http.StatusNotFound, ""},
		{"GET", "/containerLogs/ns/web/", http.StatusNotFound, ""},
		{"POST", "/containerLogs/ns/web/app", http.StatusMethodNotAllowed, ""},
		{"GET", "/containerLogs/ns/web/app", http.StatusOK, "app's second run"},
		{"GET", "/containerLogs/ns/nosuch/app", http.StatusNotFound, `pod "ns/nosuch"`},
		{"GET", "/containerLogs/ns/elsewhere/app", http.StatusNotFound, `pod "ns/elsewhere"`},
		{"GET", "/containerLogs/other/web/app", http.StatusNotFound, `pod "other/web"`},
		// Exec, attach and run name a container, with the pod's UID or
		// without; port forwarding names the pod.
		{"PUT", "/exec/ns/web/app?command=ls&output=1", http.StatusMethodNotAllowed, ""},
		{"GET", "/exec/ns/web", http.StatusNotFound, ""},
		{"GET", "/exec/ns/web/uid-web/app/extra?command=ls&output=1", http.StatusNotFound, ""},
		{"GET", "/exec/ns/web/app?output=1", http.StatusBadRequest, "you must specify a command"},
		{"GET", "/exec/ns/web/app?command=ls", http.StatusBadRequest, "at least one of stdin, stdout, stderr"},
		{"GET", "/exec/ns/web/nosuch?command=ls&output=1", http.StatusNotFound, `container "nosuch"`},
		{"GET", "/exec/ns/web/uid-other/app?command=ls&output=1", http.StatusNotFound, "with UID uid-other"},
		{"GET", "/exec/ns/elsewhere/app?command=ls&output=1", http.StatusNotFound, `pod "ns/elsewhere"`},
		{"GET", "/exec/ns/web/sidecar?command=ls&output=1", http.StatusBadRequest, `container "sidecar" in pod "web" is not running`},
		{"DELETE", "/attach/ns/web/app?output=1", http.StatusMethodNotAllowed, ""},
		{"GET", "/attach/ns/web/app", http.StatusBadRequest, "at least one of stdin, stdout, stderr"},
		{"GET", "/attach/ns/web/uid-other/app?output=1", http.StatusNotFound, "with UID uid-other"},
		{"GET", "/run/ns/web/app?cmd=ls", http.StatusMethodNotAllowed, ""},
		{"POST", "/run/ns/web/app", http.StatusBadRequest, "you must specify a command in cmd"},
		{"POST", "/run/ns/web/app?cmd=%20", http.StatusBadRequest, "you must specify a command in cmd"},
		{"POST", "/run/ns/web/uid-other/app?cmd=ls", http.StatusNotFound, "with UID uid-other"},
		{"GET", "/portForward/ns", http.StatusNotFound, ""},
		{"PUT", "/portForward/ns/web", http.StatusMethodNotAllowed, ""},
		{"GET", "/portForward/ns/web/uid-other", http.StatusNotFound, "with UID uid-other"},
		{"GET", "/portForward/ns/nosuch?port=80", http.StatusNotFound, `pod "ns/nosuch"`},
		{"GET", "/portForward/ns/web?port=http", http.StatusBadRequest, `port "http" is not a valid port`},
		{"GET", "/portForward/ns/web?port=0", http.StatusBadRequest, `port "0"`},
		{"GET", "/portForward/ns/web?port=65536", http.StatusBadRequest, `port "65536"`},
		{"GET", "/portForward/ns/web?port=-1", http.StatusBadRequest, `port "-1"`},
		{"GET", "/portForward/ns/web?port=80,", http.StatusBadRequest, `port ""`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			g := NewWithT(t)
			w := f.do(tc.method, tc.path)
			g.Expect(w.Code).To(Equal(tc.code), "body: %s", w.Body.String())
			if tc.body != "" {
				g.Expect(w.Body.String()).To(ContainSubstring(tc.body))
			}
		})
	}
}

// With enableProfilingHandler, Go's pprof handlers are on the node API,
// where a request to them needs nodes/proxy.
func TestProfilingRoutes(t *testing.T) {
	f := newAPIFixture(t)
	f.opts.Profiling = true
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/debug/pprof/", http.StatusOK},
		{"GET", "/debug/pprof/heap", http.StatusOK},
		{"GET", "/debug/pprof/cmdline", http.StatusOK},
		{"DELETE", "/debug/pprof/", http.StatusMethodNotAllowed},
	} {
		w := f.do(tc.method, tc.path)
		if w.Code != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, w.Code, tc.code)
		}
	}
	if a := RequestAttributes(http.MethodGet, "/debug/pprof/heap"); a.Verb != "get" || len(a.Subresources) != 1 || a.Subresources[0] != "proxy" {
		t.Errorf("/debug/pprof/heap is authorized as %+v, want get nodes/proxy", a)
	}
}

func TestUncleanPathsAreRedirectedNotServed(t *testing.T) {
	// Authorization looks at the path as sent: a path that reaches another
	// handler once cleaned must not be served under the first one's
	// permission, only redirected.
	f := newAPIFixture(t)
	f.opts.Stats = statstest.New(t).Provider
	for _, tc := range []struct{ path, location string }{
		{"/stats/../pods", "/pods"},
		{"/stats/summary/../../exec/ns/web/app?command=ls&output=1", "/exec/ns/web/app?command=ls&output=1"},
		{"/healthz/./../pods", "/pods"},
		{"//pods", "/pods"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			g := NewWithT(t)
			w := f.do(http.MethodGet, tc.path)
			g.Expect(w.Code).To(BeElementOf(http.StatusMovedPermanently, http.StatusTemporaryRedirect), "body: %s", w.Body.String())
			g.Expect(w.Header().Get("Location")).To(Equal(tc.location))
			g.Expect(w.Body.String()).NotTo(ContainSubstring("PodList"))
			g.Expect(f.rs.execs).To(BeEmpty())
		})
	}
}

func TestPodsListsOnlyThisNodesPods(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	w := f.do(http.MethodGet, "/pods")
	g.Expect(w.Code).To(Equal(http.StatusOK))
	g.Expect(w.Header().Get("Content-Type")).To(Equal("application/json"))
	var list corev1.PodList
	g.Expect(json.Unmarshal(w.Body.Bytes(), &list)).To(Succeed())
	g.Expect(list.Kind).To(Equal("PodList"))
	g.Expect(list.APIVersion).To(Equal("v1"))
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Name).To(Equal("web"))
	g.Expect(list.Items[0].UID).To(Equal(types.UID(webUID)))
	g.Expect(list.Items[0].Status.ContainerStatuses).To(HaveLen(3), "with their status")

	f.podsErr = errors.New("cache not synced")
	w = f.do(http.MethodGet, "/pods")
	g.Expect(w.Code).To(Equal(http.StatusInternalServerError))
	g.Expect(w.Body.String()).To(ContainSubstring("listing pods: cache not synced"))
}

func TestPodReadErrorsAreServerErrors(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	f.podsErr = errors.New("cache not synced")
	for _, path := range []string{"/containerLogs/ns/web/app", "/exec/ns/web/app?command=ls&output=1", "/portForward/ns/web"} {
		w := f.do(http.MethodGet, path)
		g.Expect(w.Code).To(Equal(http.StatusInternalServerError), path)
		g.Expect(w.Body.String()).To(ContainSubstring(`reading pod ns/web: cache not synced`), path)
	}
}

func TestMetricsEndpoints(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	reg := prometheus.NewRegistry()
	probes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total", Help: "h"}, []string{"probe_type"})
	probes.WithLabelValues("Liveness").Add(3)
	duration := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "prober_probe_duration_seconds", Help: "h"})
	duration.Observe(0.5)
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_runtime_operations_total", Help: "h"})
	other.Add(7)
	reg.MustRegister(probes, duration, other)
	f.opts.Metrics = reg

	all := f.do(http.MethodGet, "/metrics")
	g.Expect(all.Code).To(Equal(http.StatusOK))
	g.Expect(all.Body.String()).To(ContainSubstring(`prober_probe_total{probe_type="Liveness"} 3`))
	g.Expect(all.Body.String()).To(ContainSubstring("kubelet_runtime_operations_total 7"))

	probed := f.do(http.MethodGet, "/metrics/probes")
	g.Expect(probed.Code).To(Equal(http.StatusOK))
	g.Expect(probed.Body.String()).To(ContainSubstring(`prober_probe_total{probe_type="Liveness"} 3`))
	g.Expect(probed.Body.String()).To(ContainSubstring("prober_probe_duration_seconds_count 1"))
	g.Expect(probed.Body.String()).NotTo(ContainSubstring("kubelet_runtime_operations_total"), "only the prober's families")

	g.Expect(f.do(http.MethodGet, "/metrics/cadvisor").Code).To(Equal(http.StatusNotFound))
	g.Expect(f.do(http.MethodPost, "/metrics").Code).To(Equal(http.StatusMethodNotAllowed))
}

func TestWriteErrorStatus(t *testing.T) {
	f := newAPIFixture(t)
	s := f.server()
	for _, tc := range []struct {
		err  error
		code int
	}{
		{badRequest("tailLines=%q is not an integer", "x"), http.StatusBadRequest},
		{fmt.Errorf("wrapped: %w", badRequest("x")), http.StatusBadRequest},
		{fmt.Errorf("%w: pod %q", errNotFound, "ns/p"), http.StatusNotFound},
		{fmt.Errorf("reading: %w", statusNotFound()), http.StatusNotFound},
		{cri.ErrNotOwned, http.StatusInternalServerError},
		{errors.New("runtime down"), http.StatusInternalServerError},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			g := NewWithT(t)
			w := httptest.NewRecorder()
			s.writeError(w, httptest.NewRequest(http.MethodGet, "/x", http.NoBody), tc.err)
			g.Expect(w.Code).To(Equal(tc.code))
			body, _ := io.ReadAll(w.Body)
			g.Expect(string(body)).To(Equal(tc.err.Error() + "\n"))
		})
	}
}

// statusNotFound is the runtime's answer for an object it does not know.
func statusNotFound() error { return status.Error(codes.NotFound, "no such container") }
