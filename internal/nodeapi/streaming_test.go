package nodeapi

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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/exec"
)

// listen serves the fixture's node API on a local port.
func (f *apiFixture) listen() *httptest.Server {
	srv := httptest.NewServer(f.server().Handler())
	f.t.Cleanup(srv.Close)
	return srv
}

// upgrade asks the node API at srv to switch protocols, as SPDY and
// WebSocket clients do, and once switched sends a line. It returns the
// status and what came back: the streaming server's greeting and echo, or
// the error.
func upgrade(t *testing.T, srv *httptest.Server, method, path string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: node-a\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n", method, path)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	greeting, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "ping\n"); err != nil {
		t.Fatal(err)
	}
	echo, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, greeting + echo
}

func TestStreamsNeedAnUpgrade(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	// The runtime's session is prepared, but a plain request is not
	// proxied to it.
	w := f.do(http.MethodPost, "/exec/ns/web/app?command=ls&output=1")
	g.Expect(w.Code).To(Equal(http.StatusBadRequest))
	g.Expect(w.Body.String()).To(ContainSubstring("Upgrade request required"))
}

func TestExecPreparesTheSessionOnTheRunningContainerAndProxiesIt(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		want       *runtimeapi.ExecRequest
	}{
		{
			name: "output and error",
			path: "/exec/ns/web/app?command=sh&command=-c&command=echo+hi&output=1&error=1",
			want: &runtimeapi.ExecRequest{Cmd: []string{"sh", "-c", "echo hi"}, Stdout: true, Stderr: true},
		},
		{
			name: "with the pod's UID",
			path: "/exec/ns/web/uid-web/app?command=ls&input=true&output=true",
			want: &runtimeapi.ExecRequest{Cmd: []string{"ls"}, Stdin: true, Stdout: true},
		},
		{
			name: "a tty merges stderr into stdout",
			path: "/exec/ns/web/app?command=sh&input=1&output=1&error=1&tty=1",
			want: &runtimeapi.ExecRequest{Cmd: []string{"sh"}, Stdin: true, Stdout: true, Tty: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newAPIFixture(t)
			srv := f.listen()
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				code, got := upgrade(t, srv, method, tc.path)
				g.Expect(code).To(Equal(http.StatusSwitchingProtocols), "body: %s", got)
				g.Expect(got).To(Equal("runtime stream " + method + " /exec/session\necho ping\n"))
			}
			want := tc.want
			want.ContainerId = f.ids["app"]
			g.Expect(f.rs.execs).To(HaveLen(2))
			for _, got := range f.rs.execs {
				g.Expect(got.String()).To(Equal(want.String()))
			}
		})
	}
}

func TestStreamsPickTheNewestRunningContainerOfThePod(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	// app restarted while its previous run is still stopping; another pod
	// has a running container of the same name.
	newer := f.Container(f.sandbox, webUID, "app", 2, true, "")
	otherSandbox := f.RunSandbox("uid-other", "other")
	other := f.Container(otherSandbox, "uid-other", "app", 9, true, "")
	f.rs.Lock()
	f.rs.Containers[f.ids["app"]].CreatedAt = 200
	f.rs.Containers[newer].CreatedAt = 300
	f.rs.Containers[other].CreatedAt = 400
	f.rs.Unlock()

	srv := f.listen()
	code, _ := upgrade(t, srv, http.MethodPost, "/exec/ns/web/app?command=ls&output=1")
	g.Expect(code).To(Equal(http.StatusSwitchingProtocols))
	code, _ = upgrade(t, srv, http.MethodPost, "/attach/ns/web/app?output=1")
	g.Expect(code).To(Equal(http.StatusSwitchingProtocols))
	g.Expect(f.do(http.MethodPost, "/run/ns/web/app?cmd=ls").Code).To(Equal(http.StatusOK))
	g.Expect(f.rs.execs[0].ContainerId).To(Equal(newer))
	g.Expect(f.rs.attaches[0].ContainerId).To(Equal(newer))
	g.Expect(f.rs.execSyncs).To(Equal([]string{newer + " ls"}))
}

func TestAttach(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	code, got := upgrade(t, f.listen(), http.MethodPost, "/attach/ns/web/uid-web/app?input=1&output=1&tty=1")
	g.Expect(code).To(Equal(http.StatusSwitchingProtocols), "body: %s", got)
	g.Expect(got).To(Equal("runtime stream POST /attach/session\necho ping\n"))
	want := &runtimeapi.AttachRequest{ContainerId: f.ids["app"], Stdin: true, Stdout: true, Tty: true}
	g.Expect(f.rs.attaches).To(HaveLen(1))
	g.Expect(f.rs.attaches[0].String()).To(Equal(want.String()))

	// Not running: the crash-looping sidecar, the finished init container.
	for _, c := range []string{"sidecar", "init"} {
		w := f.do(http.MethodPost, "/attach/ns/web/"+c+"?output=1")
		g.Expect(w.Code).To(Equal(http.StatusBadRequest), c)
		g.Expect(w.Body.String()).To(ContainSubstring("is not running"), c)
	}
	g.Expect(f.rs.attaches).To(HaveLen(1), "the runtime was not asked again")
}

func TestPortForward(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	srv := f.listen()
	for _, tc := range []struct {
		path  string
		ports []int32
	}{
		// SPDY clients name the ports in the stream headers.
		{"/portForward/ns/web", nil},
		// WebSocket clients in the query, repeated or comma-separated.
		{"/portForward/ns/web?port=8080", []int32{8080}},
		{"/portForward/ns/web/uid-web?port=80,%20443&port=65535", []int32{80, 443, 65535}},
	} {
		f.rs.forwards = nil
		code, got := upgrade(t, srv, http.MethodGet, tc.path)
		g.Expect(code).To(Equal(http.StatusSwitchingProtocols), "%s: %s", tc.path, got)
		g.Expect(got).To(Equal("runtime stream GET /portforward/session\necho ping\n"))
		g.Expect(f.rs.forwards).To(HaveLen(1))
		g.Expect(f.rs.forwards[0].GetPodSandboxId()).To(Equal(f.sandbox), tc.path)
		g.Expect(f.rs.forwards[0].GetPort()).To(Equal(tc.ports), tc.path)
	}

	// Only a ready sandbox is forwarded to.
	f.rs.forwards = nil
	g.Expect(f.Client.StopPodSandbox(context.Background(), f.sandbox)).To(Succeed())
	w := f.do(http.MethodGet, "/portForward/ns/web?port=80")
	g.Expect(w.Code).To(Equal(http.StatusBadRequest))
	g.Expect(w.Body.String()).To(ContainSubstring(`pod "web" has no running sandbox`))
	g.Expect(f.rs.forwards).To(BeEmpty())
}

func TestRun(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	f.rs.syncStdout, f.rs.syncStderr = []byte("out\n"), []byte("err\n")

	// cmd from the query or a form body, split on spaces.
	w := f.do(http.MethodPost, "/run/ns/web/app?cmd=echo+hello++there")
	g.Expect(w.Code).To(Equal(http.StatusOK), "body: %s", w.Body.String())
	g.Expect(w.Header().Get("Content-Type")).To(Equal("text/plain"))
	g.Expect(w.Body.String()).To(Equal("out\nerr\n"), "stdout, then stderr")
	r := httptest.NewRequest(http.MethodPost, "/run/ns/web/uid-web/app", strings.NewReader(url.Values{"cmd": {"cat /etc/hostname"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = f.serve(r)
	g.Expect(w.Code).To(Equal(http.StatusOK), "body: %s", w.Body.String())
	g.Expect(f.rs.execSyncs).To(Equal([]string{
		f.ids["app"] + " echo hello there",
		f.ids["app"] + " cat /etc/hostname",
	}))

	// A command that fails is a 500 with its error (exit code and stderr),
	// as the kubelet answers, with or without output.
	f.rs.syncErr = exec.CodeExitError{Err: errors.New("command 'false' exited with 3: err"), Code: 3}
	w = f.do(http.MethodPost, "/run/ns/web/app?cmd=false")
	g.Expect(w.Code).To(Equal(http.StatusInternalServerError))
	g.Expect(w.Body.String()).To(ContainSubstring("exited with 3: err"))
	g.Expect(w.Body.String()).NotTo(ContainSubstring("out"))
	f.rs.syncErr = exec.CodeExitError{Err: errors.New("exit status 3"), Code: 3}
	f.rs.syncStdout, f.rs.syncStderr = nil, nil
	w = f.do(http.MethodPost, "/run/ns/web/app?cmd=false")
	g.Expect(w.Code).To(Equal(http.StatusInternalServerError))
	g.Expect(w.Body.String()).To(ContainSubstring("exit status 3"))
}

func TestStreamingRuntimeErrors(t *testing.T) {
	for _, tc := range []struct {
		call, method, path string
		err                error
		code               int
	}{
		{"Exec", http.MethodPost, "/exec/ns/web/app?command=ls&output=1", errors.New("runtime down"), http.StatusInternalServerError},
		{"Exec", http.MethodPost, "/exec/ns/web/app?command=ls&output=1", statusNotFound(), http.StatusNotFound},
		{"Attach", http.MethodPost, "/attach/ns/web/app?output=1", errors.New("runtime down"), http.StatusInternalServerError},
		{"PortForward", http.MethodGet, "/portForward/ns/web?port=80", errors.New("runtime down"), http.StatusInternalServerError},
		{"ListContainers", http.MethodPost, "/exec/ns/web/app?command=ls&output=1", errors.New("runtime down"), http.StatusInternalServerError},
		{"ListPodSandbox", http.MethodGet, "/portForward/ns/web?port=80", errors.New("runtime down"), http.StatusInternalServerError},
		{"ExecSync", http.MethodPost, "/run/ns/web/app?cmd=ls", errors.New("runtime down"), http.StatusInternalServerError},
	} {
		t.Run(tc.call+" "+tc.err.Error(), func(t *testing.T) {
			g := NewWithT(t)
			f := newAPIFixture(t)
			f.rs.InjectError(tc.call, tc.err)
			w := f.do(tc.method, tc.path)
			g.Expect(w.Code).To(Equal(tc.code), "body: %s", w.Body.String())
			g.Expect(w.Body.String()).To(ContainSubstring(tc.err.Error()))
		})
	}
}
