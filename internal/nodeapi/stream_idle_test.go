package nodeapi

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// serveEchoStream is a runtime streaming server whose session lasts until
// either side closes: it echoes every line, and reports on ended when its
// side of the session is gone.
func serveEchoStream(ended chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer func() {
			_ = conn.Close()
			ended <- struct{}{}
		}()
		_, _ = fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
		_ = buf.Flush()
		for {
			line, err := buf.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(buf, "echo %s", line)
			_ = buf.Flush()
		}
	}
}

func TestStreamsWithoutTrafficAreClosedAfterTheIdleTimeout(t *testing.T) {
	for _, tc := range []struct{ name, path string }{
		{"exec", "/exec/ns/web/app?command=sh&input=1&output=1"},
		{"attach", "/attach/ns/web/app?input=1&output=1"},
		{"port-forward", "/portForward/ns/web?port=80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := newAPIFixture(t)
			ended := make(chan struct{}, 1)
			backend := httptest.NewServer(serveEchoStream(ended))
			t.Cleanup(backend.Close)
			f.rs.streamURL = backend.URL
			// Long enough that a loaded machine's scheduling delays (a
			// test binary beside a build on two cores) stay well inside it.
			const timeout = 600 * time.Millisecond
			f.opts.StreamIdleTimeout = timeout
			srv := f.listen()

			conn, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 5*time.Second)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = conn.Close() }()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: node-a\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n", tc.path)
			g.Expect(err).NotTo(HaveOccurred())
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.StatusCode).To(Equal(http.StatusSwitchingProtocols))

			// Traffic keeps the session open well past the timeout.
			start := time.Now()
			var lastTraffic time.Time
			for i := 0; ; i++ {
				_, err := fmt.Fprintf(conn, "line %d\n", i)
				g.Expect(err).NotTo(HaveOccurred())
				echo, err := br.ReadString('\n')
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(echo).To(Equal(fmt.Sprintf("echo line %d\n", i)))
				lastTraffic = time.Now()
				if time.Since(start) >= 3*timeout {
					break
				}
				time.Sleep(timeout / 4)
			}
			// Silence ends it, on both sides, about a timeout after the
			// last traffic.
			_, err = br.ReadByte()
			took := time.Since(lastTraffic)
			g.Expect(errors.Is(err, io.EOF)).To(BeTrue(), "got %v", err)
			g.Expect(took).To(BeNumerically(">=", timeout/2))
			g.Expect(took).To(BeNumerically("<", 4*timeout))
			g.Eventually(ended).WithTimeout(5 * time.Second).Should(Receive())
		})
	}
}

func TestStreamsAreNotServedToHead(t *testing.T) {
	for _, path := range []string{"/exec/ns/web/app?command=ls&output=1", "/attach/ns/web/app?output=1", "/portForward/ns/web?port=80"} {
		g := NewWithT(t)
		f := newAPIFixture(t)
		w := f.do(http.MethodHead, path)
		g.Expect(w.Code).To(Equal(http.StatusMethodNotAllowed), path)
		g.Expect(w.Header().Get("Allow")).To(Equal("GET, POST"))
		g.Expect(f.rs.execs).To(BeEmpty())
		g.Expect(f.rs.attaches).To(BeEmpty())
		g.Expect(f.rs.forwards).To(BeEmpty())
	}
}

// A client that connects and says nothing, or says one thing and then
// nothing, is closed after IdleTimeout: the wait for a first request is
// bounded like the wait for the next.
func TestIdleConnectionsAreClosed(t *testing.T) {
	g := NewWithT(t)
	f := newAPIFixture(t)
	const timeout = 300 * time.Millisecond
	f.opts.IdleTimeout = timeout
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node-a"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"node-a"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	g.Expect(err).NotTo(HaveOccurred())
	cert := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	tlsConfig, err := TLSConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.opts.TLS = tlsConfig
	f.opts.Address = "127.0.0.1"
	s := f.server()
	g.Expect(s.Listen()).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	dial := func() *tls.Conn {
		conn, err := tls.Dial("tcp", s.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test client
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	closedWithin := func(conn *tls.Conn, r *bufio.Reader) time.Duration {
		start := time.Now()
		_ = conn.SetReadDeadline(start.Add(5 * time.Second))
		_, err := r.ReadByte()
		g.Expect(errors.Is(err, io.EOF)).To(BeTrue(), "got %v", err)
		return time.Since(start)
	}

	silent := dial()
	g.Expect(silent.Handshake()).To(Succeed())
	g.Expect(closedWithin(silent, bufio.NewReader(silent))).To(BeNumerically("<", 3*timeout))

	once := dial()
	_, err = io.WriteString(once, "GET /healthz HTTP/1.1\r\nHost: node-a\r\n\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	br := bufio.NewReader(once)
	resp, err := http.ReadResponse(br, nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, _ = io.Copy(io.Discard, resp.Body)
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(closedWithin(once, br)).To(BeNumerically("<", 3*timeout))

	// A body announced and never sent is idle too, once answered.
	stalled := dial()
	_, err = io.WriteString(stalled, "POST /healthz HTTP/1.1\r\nHost: node-a\r\nContent-Length: 100\r\n\r\npart")
	g.Expect(err).NotTo(HaveOccurred())
	br = bufio.NewReader(stalled)
	resp, err = http.ReadResponse(br, nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, _ = io.Copy(io.Discard, resp.Body)
	g.Expect(closedWithin(stalled, br)).To(BeNumerically("<", 3*timeout))
}
