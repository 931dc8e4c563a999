package executor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	utilexec "k8s.io/utils/exec"

	"github.com/nodelet/nodelet/internal/kuberuntime/state"
)

func serverHostPort(t *testing.T, raw string) (string, int) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return host, n
}

func TestRunHook(t *testing.T) {
	// Written by the servers' handlers, which may outlive a hook's timeout.
	var lastUA atomic.Value
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastUA.Store(r.Header.Get("User-Agent"))
		switch r.URL.Path {
		case "/error":
			w.WriteHeader(http.StatusInternalServerError)
		case "/slow":
			time.Sleep(2 * time.Second)
		}
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer secure.Close()
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	// Redirects to another host (localhost, not 127.0.0.1): not followed.
	_, otherPort := serverHostPort(t, other.URL)
	redirect := httptest.NewServer(http.RedirectHandler("http://localhost:"+strconv.Itoa(otherPort)+"/", http.StatusFound))
	defer redirect.Close()
	host, port := serverHostPort(t, plain.URL)
	_, securePort := serverHostPort(t, secure.URL)
	_, redirectPort := serverHostPort(t, redirect.URL)

	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	pod := fakePod("app")
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)
	id := rt.Containers[0].ID
	target := hookTarget{pod: pod, name: "app", spec: &pod.Spec.Containers[0], id: id, podIP: host}

	get := func(scheme v1.URIScheme, path string, port intstr.IntOrString) *v1.LifecycleHandler {
		return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Scheme: scheme, Path: path, Port: port}}
	}
	tests := []struct {
		name    string
		h       *v1.LifecycleHandler
		execErr error
		timeout time.Duration
		// wantMsg: "" for success, else a prefix of the failure's message.
		wantMsg     string
		wantTimeout bool
	}{
		{name: "exec succeeds", h: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}},
		{name: "exec exits non-zero: the kubelet's message with the runtime's words",
			h:       &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "exit 1"}}},
			execErr: utilexec.CodeExitError{Err: errors.New("command 'sh -c exit 1' exited with 1: "), Code: 1},
			wantMsg: `Exec lifecycle hook ([sh -c exit 1]) for Container "app" in Pod "web_ns(uid-1)" failed - error: command 'sh -c exit 1' exited with 1: , message: ""`},
		{name: "http 200", h: get("", "/ok", intstr.FromInt32(int32(port)))},
		{name: "http by port name", h: get(v1.URISchemeHTTP, "/ok", intstr.FromString("http"))},
		{name: "http status is not judged, as by the kubelet", h: get("", "/error", intstr.FromInt32(int32(port)))},
		{name: "https certificate is not verified", h: get(v1.URISchemeHTTPS, "/", intstr.FromInt32(int32(securePort)))},
		{name: "redirect to another host is not followed", h: get("", "/", intstr.FromInt32(int32(redirectPort)))},
		{name: "unknown port name", h: get("", "/", intstr.FromString("nope")),
			wantMsg: `HTTP lifecycle hook (/) for Container "app" in Pod "web_ns(uid-1)" failed - error: container app has no port named "nope"`},
		{name: "connection refused", h: get("", "/", intstr.FromInt32(1)),
			wantMsg: `HTTP lifecycle hook (/) for Container "app" in Pod "web_ns(uid-1)" failed - error: Get "http://`},
		{name: "http bounded by the deadline", h: get("", "/slow", intstr.FromInt32(int32(port))), timeout: 200 * time.Millisecond,
			wantMsg: `HTTP lifecycle hook (/slow)`, wantTimeout: true},
		{name: "sleep", h: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 0}}},
		{name: "sleep bounded by the deadline", h: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 30}}, timeout: 100 * time.Millisecond,
			wantMsg: `Sleep lifecycle hook (30) for Container "app" in Pod "web_ns(uid-1)" failed - error: not finished within 100ms`, wantTimeout: true},
		{name: "no action", h: &v1.LifecycleHandler{}, wantMsg: "Cannot run handler: invalid handler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			if tt.execErr != nil {
				rs.InjectError("ExecSync", tt.execErr)
			}
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			err := e.runHook(ctx, target, tt.h, timeout)
			if tt.wantMsg == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			var he *HookError
			g.Expect(errors.As(err, &he)).To(BeTrue(), "a *HookError: %v", err)
			g.Expect(he.Message).To(HavePrefix(tt.wantMsg))
			g.Expect(errors.Is(err, context.DeadlineExceeded)).To(Equal(tt.wantTimeout))
		})
	}
	if ua := lastUA.Load(); ua != hookUserAgent {
		t.Errorf("User-Agent %q, want %q", ua, hookUserAgent)
	}
	if otherHits.Load() != 0 {
		t.Errorf("the redirect to another host was followed")
	}
}

func TestFailedPostStartHookKillsAndRecordsTheContainer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, rs := newFakeExecutor(t)
	rec := record.NewFakeRecorder(100)
	e.Recorder = rec
	pod := fakePod("app", "second")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "exit 1"}}}}
	rs.InjectError("ExecSync", utilexec.CodeExitError{Err: errors.New("command 'sh -c exit 1' exited with 1: "), Code: 1})
	st := state.NewPodState(pod.UID)
	rt := runPod(t, ctx, e, pod, &st)

	w := st.Containers["app"].Waiting
	g.Expect(w).NotTo(BeNil())
	g.Expect(w.Reason).To(Equal(state.ReasonPostStartHookError))
	g.Expect(w.Message).To(HavePrefix(`Exec lifecycle hook ([sh -c exit 1]) for Container "app" in Pod "web_ns(uid-1)" failed`))
	g.Expect(st.Containers["second"].Waiting).To(BeNil(), "the next container still starts")
	states := map[string]state.ContainerState{}
	for _, c := range rt.Containers {
		states[c.Name] = c.State
	}
	g.Expect(states).To(Equal(map[string]state.ContainerState{
		"app": state.ContainerExited, "second": state.ContainerRunning,
	}))
	close(rec.Events)
	var events []string
	for ev := range rec.Events {
		events = append(events, ev)
	}
	g.Expect(events).To(ContainElement("Warning FailedPostStartHook PostStartHook failed"))
	g.Expect(events).To(ContainElement("Normal Killing FailedPostStartHook"))
	for _, ev := range events {
		g.Expect(ev).NotTo(ContainSubstring("exit 1"), "Events never carry the hook's output")
	}
	// The start order holds: app's hook ran before second was created.
	calls := strings.Join(rs.GetCalls(), ",")
	g.Expect(strings.Index(calls, "ExecSync")).To(BeNumerically("<", strings.LastIndex(calls, "CreateContainer")))
}

func TestLogDirectoryFailureIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e, _ := newFakeExecutor(t)
	rec := record.NewFakeRecorder(10)
	e.Recorder = rec
	// A file where the log root should be: the directory cannot be made.
	root := t.TempDir() + "/file"
	g.Expect(os.WriteFile(root, nil, 0o600)).To(Succeed())
	e.Sandbox.PodLogsDir = root
	pod := fakePod("app")
	st := state.NewPodState(pod.UID)
	err := e.Start(ctx, pod, state.PodRuntime{}, &st, startPlan(pod), noSave)
	g.Expect(err).To(MatchError(ContainSubstring("creating pod log directory")))
	g.Expect(st.SandboxFailure).NotTo(BeNil())
	g.Expect(st.SandboxFailure.Message).To(HavePrefix("Failed to create pod sandbox: creating pod log directory: "))
	g.Expect(rec.Events).To(Receive(HavePrefix("Warning FailedCreatePodSandBox Failed to create pod sandbox: creating pod log directory")))
}
