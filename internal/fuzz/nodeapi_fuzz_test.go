package fuzz

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakecri "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/cri-client/pkg/logs"
	kubetypes "k8s.io/kubelet/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodelet/nodelet/internal/cri"
	"github.com/nodelet/nodelet/internal/nodeapi"
	"github.com/nodelet/nodelet/internal/nodeapi/nodeapitest"
)

// The node API fixture: node "fuzz-node" runs pod ns/web (containers app,
// restarted once and running, and sidecar, exited) and pod ns/victim
// (container app, whose log holds a secret); ns/elsewhere is another
// node's. web's status is forged to name the victim's container
// everywhere, as someone who may write pod status could.
const (
	apiNode      = "fuzz-node"
	victimSecret = "victim-secret"
)

// The identities the fake TokenReview knows, by token: admin may do
// anything, getter only get. Anonymous requests are let through, and may
// only get nodes/healthz.
var apiTokens = map[string]string{"admin-token": "admin", "getter-token": "getter"}

func apiAllowed(user, verb, sub string) bool {
	switch user {
	case "admin":
		return true
	case "getter":
		return verb == "get"
	case "system:anonymous":
		return verb == "get" && sub == "healthz"
	}
	return false
}

// decision is one SubjectAccessReview the authorizer asked for.
type decision struct {
	user, verb, sub string
	allowed         bool
}

// served is one runtime call that serves a node API request.
type served struct {
	call        string // exec, attach, portforward, execsync, logs
	containerID string
	sandboxID   string
}

// apiFixture is built once per fuzzing process; each input's request runs
// alone (the fuzz function of one process is not called concurrently), and
// what it caused is recorded and reset.
type apiFixture struct {
	fake    *fakecri.FakeRuntimeService
	handler http.Handler
	srv     *httptest.Server
	uids    map[string]string // pod UID -> namespace/name

	mu        sync.Mutex
	decisions []decision
	calls     []served
	panicked  any
	handled   int
	inflight  atomic.Int64
}

func (f *apiFixture) record(c served) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

// take returns and resets what the last request caused.
func (f *apiFixture) take() (decisions []decision, calls []served, panicked any, handled int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	decisions, calls, panicked, handled = f.decisions, f.calls, f.panicked, f.handled
	f.decisions, f.calls, f.panicked, f.handled = nil, nil, nil, 0
	return decisions, calls, panicked, handled
}

// recordingRuntime is nodelet's CRI client over the CRI fake, recording
// every call that serves a request and pointing streams at the fixture's
// streaming server.
type recordingRuntime struct {
	*cri.Client
	f         *apiFixture
	streamURL string
}

func (r *recordingRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if _, err := r.Client.Exec(ctx, req); err != nil {
		return nil, err
	}
	r.f.record(served{call: "exec", containerID: req.GetContainerId()})
	return &runtimeapi.ExecResponse{Url: r.streamURL + "/exec/x"}, nil
}

func (r *recordingRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if _, err := r.Client.Attach(ctx, req); err != nil {
		return nil, err
	}
	r.f.record(served{call: "attach", containerID: req.GetContainerId()})
	return &runtimeapi.AttachResponse{Url: r.streamURL + "/attach/x"}, nil
}

func (r *recordingRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if _, err := r.Client.PortForward(ctx, req); err != nil {
		return nil, err
	}
	r.f.record(served{call: "portforward", sandboxID: req.GetPodSandboxId()})
	return &runtimeapi.PortForwardResponse{Url: r.streamURL + "/portforward/x"}, nil
}

func (r *recordingRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	r.f.record(served{call: "execsync", containerID: id})
	return r.Client.ExecSync(ctx, id, cmd, timeout)
}

func (r *recordingRuntime) ReadLogs(ctx context.Context, path, id string, opts *logs.LogOptions, stdout, stderr io.Writer) error {
	r.f.record(served{call: "logs", containerID: id})
	return r.Client.ReadLogs(ctx, path, id, opts, stdout, stderr)
}

func newAPIFixture(tb testing.TB) *apiFixture {
	tb.Helper()
	f := &apiFixture{uids: map[string]string{}}
	stream := nodeapitest.StreamServer(tb, nil)
	f.fake = fakecri.NewFakeRuntimeService()
	runtime := nodeapitest.NewRuntime(tb, apiNode, f.fake, f.fake)
	rt := &recordingRuntime{Client: runtime.Client, f: f, streamURL: stream.URL}

	sandbox := func(uid, name string) string {
		id := runtime.RunSandbox(uid, name)
		f.uids[uid] = "ns/" + name
		return id
	}
	container := func(sb, uid, name string, attempt uint32, running bool, line string) string {
		id := runtime.Container(sb, uid, name, attempt, running, "")
		runtime.WriteLog(id, fmt.Sprintf("2026-01-02T03:04:00.000000000Z stdout F %s\n2026-01-02T03:04:01.000000000Z stderr F %s again\n", line, line))
		return id
	}
	webSandbox := sandbox("uid-web", "web")
	container(webSandbox, "uid-web", "app", 0, false, "app first run")
	container(webSandbox, "uid-web", "app", 1, true, "app second run")
	container(webSandbox, "uid-web", "sidecar", 0, false, "sidecar exited")
	victimSandbox := sandbox("uid-victim", "victim")
	victim := container(victimSandbox, "uid-victim", "app", 0, true, victimSecret)

	forged := v1.ContainerStatus{ContainerID: "containerd://" + victim,
		State:                v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://" + victim}}}
	app, sidecar := forged, forged
	app.Name, sidecar.Name = "app", "sidecar"
	pods := []client.Object{
		&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"},
			Spec:       v1.PodSpec{NodeName: apiNode, Containers: []v1.Container{{Name: "app"}, {Name: "sidecar"}}},
			Status:     v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{app, sidecar}},
		},
		&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "uid-victim"},
			Spec:       v1.PodSpec{NodeName: apiNode, Containers: []v1.Container{{Name: "app"}}},
		},
		&v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "elsewhere", UID: "uid-elsewhere"},
			Spec:       v1.PodSpec{NodeName: "other-node", Containers: []v1.Container{{Name: "app"}}},
		},
	}
	reviewer := fakeclient.NewClientBuilder().WithObjects(pods...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			switch r := obj.(type) {
			case *authnv1.TokenReview:
				if user, ok := apiTokens[r.Spec.Token]; ok {
					r.Status.Authenticated = true
					r.Status.User = authnv1.UserInfo{Username: user}
				}
			case *authzv1.SubjectAccessReview:
				a := r.Spec.ResourceAttributes
				if a == nil || a.Resource != "nodes" || a.Name != apiNode {
					return errors.New("a review about something else than this node")
				}
				r.Status.Allowed = apiAllowed(r.Spec.User, a.Verb, a.Subresource)
				f.mu.Lock()
				f.decisions = append(f.decisions, decision{user: r.Spec.User, verb: a.Verb, sub: a.Subresource, allowed: r.Status.Allowed})
				f.mu.Unlock()
			default:
				return fmt.Errorf("unexpected create of %T", obj)
			}
			return nil
		},
	}).Build()

	s := nodeapi.New(nodeapi.Options{
		NodeName: apiNode,
		Authenticator: nodeapi.NewAuthenticator(nodeapi.Authenticator{Reviewer: reviewer, Anonymous: true,
			FailureCacheTTL: -1, ReviewQPS: 1e9, ReviewBurst: 1 << 30}),
		Authorizer:        nodeapi.NewAuthorizer(nodeapi.Authorizer{Reviewer: reviewer, NodeName: apiNode}),
		Pods:              reviewer,
		Runtime:           rt,
		StreamIdleTimeout: time.Second,
	})
	api := s.Handler()
	f.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.inflight.Add(1)
		defer f.inflight.Add(-1)
		f.mu.Lock()
		f.handled++
		f.mu.Unlock()
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler { //nolint:errorlint // the sentinel is compared, as net/http does
					panic(p)
				}
				f.mu.Lock()
				f.panicked = p
				f.mu.Unlock()
			}
		}()
		// A followed log lasts as long as its client: bound it.
		ctx, cancel := context.WithTimeout(r.Context(), 300*time.Millisecond)
		defer cancel()
		api.ServeHTTP(w, r.WithContext(ctx))
	})
	f.srv = httptest.NewServer(f.handler)
	tb.Cleanup(f.srv.Close)
	return f
}

// rawRequest builds the bytes of one HTTP/1.1 request from the fuzzer's
// parts, or reports that they cannot be one request line and header block
// (a client cannot send those; the server's own parser answers them).
// framed is whether the fuzzer's headers give the body's length, which may
// then be longer than the body sent.
func rawRequest(method, target, headers string, body []byte, who uint8) (raw []byte, framed, ok bool) {
	if method == "" || strings.ContainsAny(method, " \t\r\n") || strings.ContainsAny(target, " \t\r\n") {
		return nil, false, false
	}
	if !strings.HasPrefix(target, "/") {
		target = "/" + target
	}
	var b strings.Builder
	// One request per connection, so that the answer read is this one's:
	// the first Connection header is the one the server reads for close,
	// and any of them may ask for an upgrade.
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: node\r\nConnection: close\r\n", method, target)
	switch who % 4 {
	case 1:
		b.WriteString("Authorization: Bearer admin-token\r\n")
	case 2:
		b.WriteString("Authorization: Bearer getter-token\r\n")
	case 3:
		b.WriteString("Authorization: Bearer not-a-token\r\n")
	}
	length := false
	for _, line := range strings.Split(headers, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" {
			continue
		}
		if strings.ContainsRune(line, '\r') || !strings.Contains(line, ":") {
			return nil, false, false
		}
		name, _, _ := strings.Cut(line, ":")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "content-length", "transfer-encoding":
			length = true
		}
		b.WriteString(line + "\r\n")
	}
	if !length {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	return append([]byte(b.String()), body...), length, true
}

// pathSegments splits a request target's path as the router does: on the
// escaped path's slashes, each segment unescaped.
func pathSegments(target string) []string {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil
	}
	var out []string
	for _, seg := range strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/") {
		s, err := url.PathUnescape(seg)
		if err != nil {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// FuzzNodeAPI sends arbitrary requests (method, path, query, headers among
// them Authorization, Upgrade, WebSocket and stream protocol ones, and a
// body) through the node API's real handler over a real connection, and
// checks that it never panics, never answers a 5xx (the fake backends do
// not fail), never runs a command or a stream without create on
// nodes/proxy allowed, never serves a log without get on nodes/proxy
// allowed, and never reads a log of another container than the named
// pod's named container.
func FuzzNodeAPI(f *testing.F) {
	for _, seed := range nodeAPISeeds() {
		f.Add(seed.method, seed.target, seed.headers, seed.body, seed.who)
	}
	fx := newAPIFixture(f)
	f.Fuzz(func(t *testing.T, method, target, headers string, body []byte, who uint8) {
		fx.check(t, apiInput{method, target, headers, body, who})
	})
}

// apiInput is one request of FuzzNodeAPI: its method, target, header lines,
// body and the identity it is sent as.
type apiInput struct {
	method, target, headers string
	body                    []byte
	who                     uint8
}

// nodeAPISeeds are FuzzNodeAPI's seed corpus.
func nodeAPISeeds() []apiInput {
	const (
		upgrade = "Connection: Upgrade\nUpgrade: websocket\nSec-WebSocket-Version: 13\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\nSec-WebSocket-Protocol: v4.channel.k8s.io"
		spdy    = "Connection: Upgrade\nUpgrade: SPDY/3.1\nX-Stream-Protocol-Version: v4.channel.k8s.io"
	)
	return []apiInput{
		{"GET", "/containerLogs/ns/web/app", "", nil, 1},
		{"GET", "/containerLogs/ns/web/app?previous=true", "", nil, 1},
		{"GET", "/containerLogs/ns/web/sidecar?previous=1&timestamps=true", "", nil, 2},
		{"GET", "/containerLogs/ns/web/app?tailLines=-1&limitBytes=99999999999999999999", "", nil, 1},
		{"GET", "/containerLogs/ns/web/app?tailLines=1&limitBytes=3&sinceSeconds=0", "", nil, 1},
		{"GET", "/containerLogs/ns/web/app?follow=true&sinceTime=2030-01-01T00:00:00Z", "", nil, 1},
		{"GET", "/containerLogs/ns/web/nosuch", "", nil, 1},
		{"GET", "/containerLogs/ns/elsewhere/app", "", nil, 1},
		{"GET", "/containerLogs/ns/victim/app", "", nil, 2},
		{"GET", "/containerLogs/ns/victim/app", "", nil, 0},
		{"GET", "/containerLogs/ns/web/..%2f..%2fvictim%2fapp", "", nil, 1},
		{"GET", "/containerLogs/ns/web/app/..%2f..%2fvictim/app", "", nil, 1},
		{"GET", "//containerLogs/ns/web/app", "", nil, 1},
		{"GET", "/containerLogs//ns/web/app", "", nil, 1},
		{"GET", "/stats/../exec/ns/web/app?command=id&output=1", upgrade, nil, 2},
		{"GET", "/exec/ns/web/app?command=id&output=1", upgrade, nil, 2},
		{"GET", "/exec/ns/web/app?command=id&output=1", upgrade, nil, 1},
		{"GET", "/exec/ns/web/uid-web/app?command=id&output=1&tty=1", spdy, nil, 1},
		{"HEAD", "/exec/ns/web/app?command=id&output=1", upgrade, nil, 2},
		{"OPTIONS", "/exec/ns/web/app?command=id&output=1", upgrade, nil, 2},
		{"POST", "/exec/ns/web/app?command=id&output=1", "", nil, 1},
		{"POST", "/exec/ns/web/app?command=id&output=1", spdy, nil, 2},
		{"GET", "/attach/ns/web/app?output=1", upgrade, nil, 2},
		{"GET", "/portForward/ns/web?port=80", upgrade, nil, 2},
		{"POST", "/portForward/ns/web/uid-web?port=80,0,99999", spdy, nil, 1},
		{"POST", "/run/ns/web/app?cmd=id", "", nil, 2},
		{"POST", "/run/ns/web/app", "Content-Type: application/x-www-form-urlencoded", []byte("cmd=cat+/etc/hostname"), 1},
		{"POST", "/run/ns/web/app", "Content-Type: application/x-www-form-urlencoded\nContent-Length: 99", []byte("cmd=id"), 1},
		{"POST", "/run/ns/web/app", "Content-Type: multipart/form-data; boundary=x", []byte("--x\r\n"), 1},
		{"GET", "/pods", "", nil, 2},
		{"GET", "/healthz", "", nil, 0},
		{"GET", "/logs/", "", nil, 1},
		{"POST", "/checkpoint/ns/web/app", "", nil, 1},
		{"GET", "/exec/ns/web/app?command=id&output=1", "Authorization: Bearer admin-token", nil, 2},
		{"GET", "/exec/ns/web/app?command=id&output=1", "Authorization: Basic YWRtaW46eA==", nil, 0},
		{"POST", "/stats/summary", "Transfer-Encoding: chunked", []byte("5\r\nhello\r\n0\r\n\r\n"), 1},
	}
}

// check sends one request to the handler and checks what it did.
func (fx *apiFixture) check(t *testing.T, in apiInput) {
	raw, framed, ok := rawRequest(in.method, in.target, in.headers, in.body, in.who)
	if !ok {
		t.Skip()
	}
	fx.take()
	conn, err := net.DialTimeout("tcp", fx.srv.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// A handler answers within its 300 ms; a body shorter than the
	// length the fuzzer gave keeps the server reading.
	wait := 5 * time.Second
	if framed {
		wait = time.Second
	}
	_ = conn.SetDeadline(time.Now().Add(wait))
	_, _ = conn.Write(raw)
	resp, rerr := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: in.method})
	var answer []byte
	if rerr == nil {
		answer, _ = io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
	}
	_ = conn.Close()
	// A counter, not a WaitGroup: a handler may begin while this waits.
	for deadline := time.Now().Add(5 * time.Second); fx.inflight.Load() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a handler of %q is still running after its client left", raw)
		}
	}
	decisions, calls, panicked, handled := fx.take()
	if panicked != nil {
		t.Fatalf("the handler panicked on %q: %v", raw, panicked)
	}
	var netErr net.Error
	if rerr != nil {
		// The server closed without an answer: a request it cannot
		// parse it answers itself, so this is a hijacked stream, or it
		// still waits for the rest of a body.
		if len(calls) == 0 && (!framed || !errors.As(rerr, &netErr) || !netErr.Timeout()) {
			t.Fatalf("no answer to %q: %v", raw, rerr)
		}
	} else if resp.StatusCode >= 500 && handled > 0 {
		// net/http answers some requests itself (501 for a transfer
		// encoding it does not know); the node API never does.
		t.Fatalf("%s (%q) to %q", resp.Status, answer, raw)
	}
	// What the authorizer allowed in this request.
	allowed := map[string]bool{}
	for _, d := range decisions {
		if d.allowed {
			allowed[d.verb+" "+d.sub] = true
		}
	}
	segs := pathSegments(strings.SplitN(string(raw), " ", 3)[1])
	for _, c := range calls {
		switch c.call {
		case "exec", "attach", "portforward", "execsync":
			if !allowed["create proxy"] {
				t.Fatalf("%s served for %q with only %v allowed", c.call, raw, decisions)
			}
		case "logs":
			if !allowed["get proxy"] {
				t.Fatalf("a log served for %q with only %v allowed", raw, decisions)
			}
			fx.fake.Lock()
			ctr, ok := fx.fake.Containers[c.containerID]
			fx.fake.Unlock()
			if !ok {
				t.Fatalf("a log of unknown container %s read for %q", c.containerID, raw)
			}
			want := []string{"containerLogs", "", "", ctr.Labels[kubetypes.KubernetesContainerNameLabel]}
			want[1], want[2], _ = strings.Cut(fx.uids[ctr.Labels[kubetypes.KubernetesPodUIDLabel]], "/")
			if strings.Join(segs, "\x00") != strings.Join(want, "\x00") {
				t.Fatalf("the log of %s (%v) read for %q", c.containerID, want, raw)
			}
		}
	}
}
