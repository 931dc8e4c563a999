package nodeapitest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fake "k8s.io/cri-api/pkg/apis/testing"
	kubetypes "k8s.io/kubelet/pkg/types"

	"github.com/nodelet/nodelet/internal/cri"
)

// Runtime is one node's runtime: nodelet's CRI client over the CRI fake,
// and a directory for the containers' log files.
type Runtime struct {
	// Client is the CRI client the node API is given.
	Client *cri.Client
	// Fake is the CRI fake under it.
	Fake *fake.FakeRuntimeService
	// LogDir holds the log files WriteLog writes.
	LogDir string

	tb testing.TB
}

// NewRuntime returns the runtime of nodeName over service: the CRI fake, or
// a wrapper of it that answers some calls its own way; fakeRuntime is the
// CRI fake itself.
func NewRuntime(tb testing.TB, nodeName string, service internalapi.RuntimeService, fakeRuntime *fake.FakeRuntimeService) *Runtime {
	tb.Helper()
	c, err := cri.New(service, fake.NewFakeImageService(), cri.Options{NodeName: nodeName})
	if err != nil {
		tb.Fatal(err)
	}
	return &Runtime{Client: c, Fake: fakeRuntime, LogDir: tb.TempDir(), tb: tb}
}

// RunSandbox runs a ready sandbox of the pod ns/name with uid and returns
// its ID.
func (r *Runtime) RunSandbox(uid, name string) string {
	r.tb.Helper()
	id, err := r.Client.RunPodSandbox(context.Background(), &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns", Uid: uid},
		Labels:   map[string]string{kubetypes.KubernetesPodUIDLabel: uid},
	}, "")
	if err != nil {
		r.tb.Fatal(err)
	}
	return id
}

// Container creates and starts an owned container of the pod with uid in
// sandbox, stops it unless running, and returns its ID. Unless line is
// empty, its log file holds line, on stdout.
func (r *Runtime) Container(sandbox, uid, name string, attempt uint32, running bool, line string) string {
	r.tb.Helper()
	ctx := context.Background()
	id, err := r.Client.CreateContainer(ctx, sandbox, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Labels:   map[string]string{kubetypes.KubernetesPodUIDLabel: uid, kubetypes.KubernetesContainerNameLabel: name},
	}, nil)
	if err != nil {
		r.tb.Fatal(err)
	}
	if err := r.Client.StartContainer(ctx, id); err != nil {
		r.tb.Fatal(err)
	}
	if !running {
		if err := r.Client.StopContainer(ctx, id, 0); err != nil {
			r.tb.Fatal(err)
		}
	}
	if line != "" {
		r.WriteLog(id, "2026-01-02T03:04:00.000000000Z stdout F "+line+"\n")
	}
	return id
}

// WriteLog makes content, in the CRI log format, the log file of container
// id, and returns its path.
func (r *Runtime) WriteLog(id, content string) string {
	r.tb.Helper()
	path := filepath.Join(r.LogDir, id+".log")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		r.tb.Fatal(err)
	}
	r.Fake.Lock()
	r.Fake.Containers[id].LogPath = path
	r.Fake.Unlock()
	return path
}

// StreamServer starts a stand-in for the runtime's streaming server, closed
// when the test ends: it answers a request without an Upgrade header 400,
// switches protocols on one with it, then runs session on the connection
// (nil ends the session at once) and closes it.
func StreamServer(tb testing.TB, session func(r *http.Request, rw *bufio.ReadWriter)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			http.Error(w, "upgrade required", http.StatusBadRequest)
			return
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() { _ = conn.Close() }()
		_, _ = fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
		_ = buf.Flush()
		if session != nil {
			session(r, buf)
		}
	}))
	tb.Cleanup(srv.Close)
	return srv
}
