package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	certutil "k8s.io/client-go/util/cert"
)

// ClientCAPool reads the CA bundle that client certificates must chain
// to; an empty path means no certificate authentication.
func ClientCAPool(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pool, err := certutil.NewPool(path)
	if err != nil {
		return nil, fmt.Errorf("loading client CA file %s: %w", path, err)
	}
	return pool, nil
}

// TLSConfig serves cert with TLS 1.2 or later and asks for (without
// requiring) a client certificate, which the Authenticator verifies, so that
// a bad certificate gets a 401 rather than a failed handshake.
func TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequestClientCert,
		NextProtos:   []string{"http/1.1"},
	}
}
