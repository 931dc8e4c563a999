package nodeapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// TestTLSConfigSettings checks, with real handshakes, that the node API
// refuses what tlsMinVersion, tlsCipherSuites and tlsCurvePreferences leave
// out and accepts what they allow.
func TestTLSConfigSettings(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node-a"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"node-a"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	getCert := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }

	tls12 := func(suite uint16) *tls.Config {
		return &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}} //nolint:gosec // the test offers old versions on purpose
	}
	cases := []struct {
		name   string
		server v1alpha1.ServerConfig
		client *tls.Config
		ok     bool
	}{
		{name: "defaults take TLS 1.2", client: tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256), ok: true},
		{name: "defaults refuse TLS 1.1", client: &tls.Config{MaxVersion: tls.VersionTLS11}}, //nolint:gosec // on purpose
		{name: "tlsMinVersion 1.3 refuses 1.2", server: v1alpha1.ServerConfig{TLSMinVersion: "VersionTLS13"},
			client: tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)},
		{name: "tlsMinVersion 1.3 takes 1.3", server: v1alpha1.ServerConfig{TLSMinVersion: "VersionTLS13"},
			client: &tls.Config{MinVersion: tls.VersionTLS13}, ok: true},
		{name: "a suite left out is refused",
			server: v1alpha1.ServerConfig{TLSCipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}},
			client: tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)},
		{name: "a suite listed is taken",
			server: v1alpha1.ServerConfig{TLSCipherSuites: []string{"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}},
			client: tls12(tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384), ok: true},
		{name: "a curve left out is refused", server: v1alpha1.ServerConfig{TLSCurvePreferences: []int32{int32(tls.CurveP384)}},
			client: &tls.Config{CurvePreferences: []tls.CurveID{tls.X25519}}},
		{name: "a curve listed is taken", server: v1alpha1.ServerConfig{TLSCurvePreferences: []int32{int32(tls.CurveP384)}},
			client: &tls.Config{CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP384}}, ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.server
			serverConfig, err := TLSConfig(getCert, &sc)
			if err != nil {
				t.Fatalf("TLSConfig: %v", err)
			}
			l, err := tls.Listen("tcp", "127.0.0.1:0", serverConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			done := make(chan error, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					done <- err
					return
				}
				defer c.Close()
				done <- c.(*tls.Conn).Handshake()
			}()
			client := tc.client.Clone()
			client.InsecureSkipVerify = true //nolint:gosec // the test checks the handshake's parameters, not identity
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", l.Addr().String(), client)
			if err == nil {
				conn.Close()
			}
			serverErr := <-done
			if tc.ok && (err != nil || serverErr != nil) {
				t.Fatalf("handshake failed: client %v, server %v", err, serverErr)
			}
			if !tc.ok && err == nil && serverErr == nil {
				t.Fatalf("handshake succeeded (%s), want it refused", tls.VersionName(conn.ConnectionState().Version))
			}
		})
	}
}

func TestTLSConfigRefusesUnknownSettings(t *testing.T) {
	for _, sc := range []v1alpha1.ServerConfig{
		{TLSMinVersion: "VersionSSL30"},
		{TLSCipherSuites: []string{"TLS_NO_SUCH_SUITE"}},
		{TLSCurvePreferences: []int32{12345}},
	} {
		if _, err := TLSConfig(nil, &sc); err == nil {
			t.Errorf("TLSConfig(%+v) succeeded, want an error", sc)
		}
	}
}
