package hollow

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// nodeCertValidity is how long a hollow node's client certificate is valid.
const nodeCertValidity = 7 * 24 * time.Hour

// NodeSigner makes the client credentials of hollow nodes with a CA the API
// server trusts for client certificates (its --client-ca-file): user
// system:node:<node> in group system:nodes, as a kubelet's TLS bootstrap
// would end with.
type NodeSigner struct {
	// Base is where the API server is and how to trust it; its own
	// credentials are dropped.
	Base *rest.Config
	cert *x509.Certificate
	key  crypto.Signer
}

// NewNodeSigner returns a signer with the CA of caCertPEM and caKeyPEM.
func NewNodeSigner(base *rest.Config, caCertPEM, caKeyPEM []byte) (*NodeSigner, error) {
	certs, err := certutil.ParseCertsPEM(caCertPEM)
	if err != nil {
		return nil, fmt.Errorf("reading the client CA certificate: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("reading the client CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the client CA key cannot sign")
	}
	return &NodeSigner{Base: base, cert: certs[0], key: signer}, nil
}

// Credentials returns the client configuration of node: Base with a new
// client certificate for system:node:<node>.
func (s *NodeSigner) Credentials(node string) (*rest.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(nodeCertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.cert, key.Public(), s.key)
	if err != nil {
		return nil, fmt.Errorf("signing the client certificate of %s: %w", node, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding a key: %w", err)
	}
	cfg := rest.AnonymousClientConfig(s.Base)
	cfg.CertData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cfg.KeyData = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return cfg, nil
}
