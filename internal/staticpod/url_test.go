package staticpod

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestURLSource(t *testing.T) {
	var mu sync.Mutex
	status, body := http.StatusOK, podListYAML
	var headers []http.Header
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		headers = append(headers, req.Header.Clone())
		hosts = append(hosts, req.Host)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	serve := func(s int, b string) {
		mu.Lock()
		status, body = s, b
		mu.Unlock()
	}

	r := newRecorder()
	s := &URLSource{
		URL: srv.URL, NodeName: "node", Period: 20 * time.Millisecond,
		Header: http.Header{"Authorization": {"Bearer t"}, "X-Multi": {"a", "b"}, "Host": {"manifests.example"}},
		Update: r.update, Report: r.report, Log: logr.Discard(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()

	r.waitFor(t, "a-node,b-node")
	r.mu.Lock()
	for _, pod := range r.updates[0] {
		if pod.Annotations[ConfigSourceAnnotationKey] != SourceHTTP {
			t.Errorf("config.source %q", pod.Annotations[ConfigSourceAnnotationKey])
		}
	}
	r.mu.Unlock()
	mu.Lock()
	if h := headers[0]; h.Get("Authorization") != "Bearer t" || strings.Join(h.Values("X-Multi"), ",") != "a,b" || hosts[0] != "manifests.example" {
		t.Errorf("headers sent %v, host %q", h, hosts[0])
	}
	mu.Unlock()
	r.quiet(t) // polls go on, but the same pods give no update

	// Failures are reported once each and keep the last set.
	for i, bad := range []struct {
		status int
		body   string
		want   string
	}{
		{http.StatusInternalServerError, "oops", "500"},
		{http.StatusOK, "kind: [", "parsing manifest"},
		{http.StatusOK, "apiVersion: v1\nkind: Secret\n", "not a Pod"},
	} {
		serve(bad.status, bad.body)
		problems := r.waitProblems(t, i+1)
		if p := problems[i]; p.Source != SourceHTTP || p.Origin != srv.URL || !strings.Contains(p.Err.Error(), bad.want) {
			t.Errorf("problem %+v, want one containing %q", p, bad.want)
		}
		r.quiet(t)
	}
	if last, n, _ := r.state(); n != 1 || last != "a-node,b-node" {
		t.Errorf("after failures: %d updates, last %q; want the first set kept", n, last)
	}

	// An empty answer is an empty set, as for the kubelet, and reported.
	serve(http.StatusOK, "")
	r.waitFor(t, "")
	if problems := r.waitProblems(t, 4); !strings.Contains(problems[3].Err.Error(), "zero-length") {
		t.Errorf("problem %v, want zero-length data", problems[3])
	}

	serve(http.StatusOK, manifestOf("c", "busybox:1"))
	r.waitFor(t, "c-node")
}

// Before the first success there is no update at all.
func TestURLSourceUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := newRecorder()
	s := &URLSource{URL: url, NodeName: "node", Period: 20 * time.Millisecond, Update: r.update, Report: r.report, Log: logr.Discard()}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, n, problems := r.state(); n != 0 || len(problems) != 1 {
		t.Errorf("%d updates and problems %v, want none and one", n, problems)
	}
}
