package utils

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// CA is a certificate authority that signs client certificates: the one
// node agents trust for callers of their API (the kubelet client CA), or
// the one the API server trusts for its own clients.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertFile is the CA certificate in PEM, to give as clientCAFile.
	CertFile string
	// KeyFile is the CA key in PEM, once WriteKey wrote it.
	KeyFile string
}

// NewCA makes a CA and writes its certificate (PEM) into dir.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the %s CA key: %w", name, err)
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: name}, key)
	if err != nil {
		return nil, fmt.Errorf("making the %s CA certificate: %w", name, err)
	}
	ca := &CA{Cert: cert, Key: key, CertFile: filepath.Join(dir, name+"-ca.crt")}
	if err := os.WriteFile(ca.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		return nil, fmt.Errorf("writing the %s CA certificate: %w", name, err)
	}
	return ca, nil
}

// WriteKey writes the CA's private key (PEM, mode 0600) next to its
// certificate, for a signer that runs in another process: the
// controller-manager's --cluster-signing-key-file.
func (ca *CA) WriteKey() error {
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return fmt.Errorf("encoding the CA key: %w", err)
	}
	path := strings.TrimSuffix(ca.CertFile, ".crt") + ".key"
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing the CA key: %w", err)
	}
	ca.KeyFile = path
	return nil
}

// ClientCert signs a client certificate for user in groups and returns its
// certificate and key in PEM.
func (ca *CA) ClientCert(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a client key for %s: %w", user, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("choosing a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing a client certificate for %s: %w", user, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding a client key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// TLSClientCert is ClientCert as a tls.Certificate.
func (ca *CA) TLSClientCert(user string, groups ...string) (tls.Certificate, error) {
	c, k, err := ca.ClientCert(user, groups...)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}
