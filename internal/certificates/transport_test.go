package certificates

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// TestRotatingTransport checks that requests present the current
// certificate, that an open connection keeps the certificate of its
// handshake, and that a rotation closes it so that the next request
// presents the new one.
func TestRotatingTransport(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			_, _ = io.WriteString(w, "anonymous")
			return
		}
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	now := time.Now()
	pair := func(cn string) *tls.Certificate {
		certPEM, keyPEM := testPair(t, cn, now.Add(-time.Minute), now.Add(time.Hour))
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	var mu sync.Mutex
	current := pair("first")
	get := func() *tls.Certificate { mu.Lock(); defer mu.Unlock(); return current }

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	base := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
	cfg, transport, err := newRotatingTransport(base, get)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("the rotating config is not usable by rest: %v", err)
	}
	who := func() string {
		t.Helper()
		resp, err := hc.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := who(); got != "first" {
		t.Fatalf("first request as %q, want first", got)
	}
	mu.Lock()
	current = pair("second")
	mu.Unlock()
	if got := who(); got != "first" {
		t.Fatalf("the open connection changed identity to %q before rotation closed it", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- transport.closeOnChange(ctx, logr.Discard(), 10*time.Millisecond, 0) }()
	deadline := time.Now().Add(5 * time.Second)
	for who() != "second" {
		if time.Now().After(deadline) {
			t.Fatal("requests still present the old certificate after rotation")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	current = nil
	mu.Unlock()
	transport.dialer.CloseAll()
	if got := who(); got != "anonymous" {
		t.Fatalf("without a valid certificate the request went as %q, want anonymous", got)
	}
}

func TestCloseOnChangeGivesUpWithoutCertificate(t *testing.T) {
	tr := &rotatingTransport{current: func() *tls.Certificate { return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := tr.closeOnChange(ctx, logr.Discard(), 5*time.Millisecond, 50*time.Millisecond)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("got %v before the deadline, want an error about the missing certificate", err)
	}
}
