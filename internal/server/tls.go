package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
)

// Self-signed serving certificate file names under the certificate
// directory, as the kubelet names its own under <root>/pki.
const (
	selfSignedCertName = "nodelet.crt"
	selfSignedKeyName  = "nodelet.key"
)

// ServingCertificate returns the server's certificate: certFile and keyFile
// when given, else the self-signed pair kept in dir (0700, files 0600),
// generated for host and ips the first time.
func ServingCertificate(certFile, keyFile, dir, host string, ips []net.IP) (tls.Certificate, error) {
	if certFile != "" || keyFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("loading serving certificate %s: %w", certFile, err)
		}
		return c, nil
	}
	certFile = filepath.Join(dir, selfSignedCertName)
	keyFile = filepath.Join(dir, selfSignedKeyName)
	if c, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
		return c, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return tls.Certificate{}, fmt.Errorf("loading self-signed serving certificate %s: %w", certFile, err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, ips, nil)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating self-signed serving certificate for %s: %w", host, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("creating certificate directory: %w", err)
	}
	// The key first: a certificate without its key would be loaded and fail.
	if err := writeFileAtomic(keyFile, keyPEM); err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFileAtomic(certFile, certPEM); err != nil {
		return tls.Certificate{}, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("parsing generated serving certificate: %w", err)
	}
	return c, nil
}

// writeFileAtomic writes data to path (0600) through a temporary file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// CreateTemp already makes 0600 files.
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

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
