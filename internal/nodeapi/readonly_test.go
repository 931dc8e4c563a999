package nodeapi

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReadOnlyPortServesOnlyReads checks the read-only port's routes: what
// only reads is served without credentials, in plain HTTP; what changes or
// reveals more (exec, attach, port-forward, run, logs, checkpoint,
// configz, pprof) is not there at all.
func TestReadOnlyPortServesOnlyReads(t *testing.T) {
	f := newAPIFixture(t)
	f.opts.ReadOnly = true
	// Nothing authenticates on this port: no credentials are needed.
	f.opts.Authenticator, f.opts.Authorizer = nil, nil
	f.opts.Metrics = prometheus.NewRegistry()
	f.opts.Configz = http.NotFoundHandler()
	f.opts.Profiling = true
	f.opts.CheckpointDir = t.TempDir()
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/healthz", http.StatusOK},
		{"GET", "/pods", http.StatusOK},
		{"GET", "/metrics", http.StatusOK},
		{"GET", "/metrics/probes", http.StatusOK},
		{"GET", "/configz", http.StatusNotFound},
		{"GET", "/containerLogs/default/web/app", http.StatusNotFound},
		{"POST", "/exec/default/web/app?command=ls", http.StatusNotFound},
		{"GET", "/attach/default/web/app", http.StatusNotFound},
		{"POST", "/portForward/default/web", http.StatusNotFound},
		{"POST", "/run/default/web/app?cmd=ls", http.StatusNotFound},
		{"POST", "/checkpoint/default/web/app", http.StatusNotFound},
		{"GET", "/debug/pprof/", http.StatusNotFound},
		{"POST", "/stats/summary", http.StatusNotFound},
	} {
		if got := f.do(tc.method, tc.path).Code; got != tc.code {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, got, tc.code)
		}
	}
}

// TestReadOnlyPortIsPlainHTTP starts the read-only server and reads /pods
// over plain HTTP without credentials.
func TestReadOnlyPortIsPlainHTTP(t *testing.T) {
	f := newAPIFixture(t)
	f.opts.ReadOnly = true
	f.opts.Authenticator, f.opts.Authorizer = nil, nil
	f.opts.Address = "127.0.0.1"
	s := f.server()
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("read-only server stopped: %v", err)
		}
	}()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + s.Addr().String() + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("GET /pods = %d %q", resp.StatusCode, body)
	}
}
