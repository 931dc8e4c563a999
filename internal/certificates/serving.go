package certificates

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// Self-signed serving certificate file names under the certificate
// directory, as the kubelet names its own under <root>/pki.
const (
	selfSignedCertName = "nodelet.crt"
	selfSignedKeyName  = "nodelet.key"
)

// ServingCertificate returns the node API server's certificate: certFile
// and keyFile when given, else the self-signed pair kept in dir (0700,
// files 0600), generated for host and ips the first time.
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
	if err := os.MkdirAll(dir, credentialDirMode); err != nil {
		return tls.Certificate{}, fmt.Errorf("creating certificate directory: %w", err)
	}
	// The key first: a certificate without its key would be loaded and fail.
	if err := atomicfile.WriteFile(keyFile, keyPEM, credentialFileMode); err != nil {
		return tls.Certificate{}, err
	}
	if err := atomicfile.WriteFile(certFile, certPEM, credentialFileMode); err != nil {
		return tls.Certificate{}, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("parsing generated serving certificate: %w", err)
	}
	return c, nil
}
