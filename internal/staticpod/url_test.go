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

// fetchOnce runs one fetch of s with its redirect rules.
func fetchOnce(s *URLSource) error {
	client := &http.Client{Timeout: time.Second, CheckRedirect: s.checkRedirect}
	_, err := s.fetch(context.Background(), client)
	return err
}

// The configured headers go to the URL's own host, also through a
// redirect, but never to another host; https is never given up for http.
func TestURLSourceRedirects(t *testing.T) {
	var mu sync.Mutex
	got := map[string]http.Header{}
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, req *http.Request) {
			mu.Lock()
			got[name] = req.Header.Clone()
			mu.Unlock()
			_, _ = w.Write([]byte(manifestOf("a", "busybox:1")))
		}
	}
	other := httptest.NewServer(record("other"))
	defer other.Close()
	var origin *httptest.Server
	origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/same":
			http.Redirect(w, req, origin.URL+"/final", http.StatusFound)
		case "/away":
			http.Redirect(w, req, other.URL+"/final", http.StatusFound)
		default:
			record("origin")(w, req)
		}
	}))
	defer origin.Close()
	header := http.Header{"X-Manifest-Token": {"s3cr3t"}, "Authorization": {"Bearer s3cr3t"}}

	if err := fetchOnce(&URLSource{URL: origin.URL + "/same", Header: header, NodeName: "node"}); err != nil {
		t.Fatal(err)
	}
	if err := fetchOnce(&URLSource{URL: origin.URL + "/away", Header: header, NodeName: "node"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if got["origin"].Get("X-Manifest-Token") != "s3cr3t" {
		t.Errorf("a redirect to the same host lost the configured headers: %v", got["origin"])
	}
	if h := got["other"]; h == nil || h.Get("X-Manifest-Token") != "" || h.Get("Authorization") != "" {
		t.Errorf("another host got %v, want it fetched without the configured headers", h)
	}
	mu.Unlock()

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, other.URL+"/plain", http.StatusFound)
	}))
	defer tlsSrv.Close()
	s := &URLSource{URL: tlsSrv.URL, Header: header, NodeName: "node"}
	client := tlsSrv.Client()
	client.CheckRedirect = s.checkRedirect
	if _, err := s.fetch(context.Background(), client); err == nil || !strings.Contains(err.Error(), "from https to http") {
		t.Errorf("a redirect from https to http: error %v", err)
	}
}

// What a source reports (it becomes an Event) names the URL without its
// user information or query, and never quotes the answer.
func TestURLSourceReportsNoCredentials(t *testing.T) {
	body := `{"token":"body-s3cr3t"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	withCreds := strings.Replace(srv.URL, "http://", "http://user:pass-s3cr3t@", 1) + "/pods?token=query-s3cr3t"
	closed := httptest.NewServer(http.NotFoundHandler())
	unreachable := strings.Replace(closed.URL, "http://", "http://user:pass-s3cr3t@", 1) + "/pods?token=query-s3cr3t"
	closed.Close()
	for _, u := range []string{withCreds, unreachable} {
		r := newRecorder()
		s := &URLSource{URL: u, NodeName: "node", Period: time.Hour, Update: r.update, Report: r.report, Log: logr.Discard()}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		go func() { _ = s.Start(ctx) }()
		problems := r.waitProblems(t, 1)
		cancel()
		p := problems[0]
		text := p.Origin + " " + p.Err.Error()
		for _, secret := range []string{"pass-s3cr3t", "query-s3cr3t", "body-s3cr3t", "user:"} {
			if strings.Contains(text, secret) {
				t.Errorf("the problem %q shows %q", text, secret)
			}
		}
		if !strings.Contains(text, "/pods") {
			t.Errorf("the problem %q does not name the URL's path", text)
		}
	}
}
