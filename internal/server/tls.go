package server

import (
	"crypto/tls"
)

// TLSConfig serves the certificate getCertificate returns at each
// handshake (so that a renewed or replaced one is served without a
// restart) with TLS 1.2 or later, and asks for (without requiring) a
// client certificate, which the Authenticator verifies, so that a bad
// certificate gets a 401 rather than a failed handshake.
func TLSConfig(getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: getCertificate,
		ClientAuth:     tls.RequestClientCert,
		NextProtos:     []string{"http/1.1"},
	}
}
