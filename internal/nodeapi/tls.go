package nodeapi

import (
	"crypto/tls"
	"fmt"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/nodelet/nodelet/api/v1alpha1"
)

// TLSConfig serves the certificate getCertificate returns at each
// handshake (so that a renewed or replaced one is served without a
// restart) with the server's TLS settings (tlsMinVersion, TLS 1.2 unless
// set; tlsCipherSuites and tlsCurvePreferences, Go's defaults unless set),
// and asks for (without requiring) a client certificate, which the
// Authenticator verifies, so that a bad certificate gets a 401 rather than
// a failed handshake.
func TLSConfig(getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error), sc *v1alpha1.ServerConfig) (*tls.Config, error) {
	c := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: getCertificate,
		ClientAuth:     tls.RequestClientCert,
		NextProtos:     []string{"http/1.1"},
	}
	if sc == nil {
		return c, nil
	}
	if sc.TLSMinVersion != "" {
		v, err := cliflag.TLSVersion(sc.TLSMinVersion)
		if err != nil {
			return nil, fmt.Errorf("tlsMinVersion: %w", err)
		}
		c.MinVersion = v
	}
	if len(sc.TLSCipherSuites) > 0 {
		suites, err := cliflag.TLSCipherSuites(sc.TLSCipherSuites)
		if err != nil {
			return nil, fmt.Errorf("tlsCipherSuites: %w", err)
		}
		c.CipherSuites = suites
	}
	for _, id := range sc.TLSCurvePreferences {
		if !v1alpha1.KnownCurve(id) {
			return nil, fmt.Errorf("tlsCurvePreferences: %d is not a key exchange Go knows", id)
		}
		c.CurvePreferences = append(c.CurvePreferences, tls.CurveID(id))
	}
	return c, nil
}
