package utils

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// KubernetesServiceIP is the ClusterIP of the default/kubernetes Service
// in the API server's service range (envtest's 10.0.0.0/24).
var KubernetesServiceIP = net.IPv4(10, 0, 0, 1)

// apiServerServingNames are the DNS names of the API server's serving
// certificate besides its addresses: those a pod reaches it by through the
// kubernetes Service.
var apiServerServingNames = []string{
	"localhost",
	"kubernetes",
	"kubernetes.default",
	"kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local",
}

// writeAPIServerCerts writes into dir what envtest would make itself, with
// a serving certificate for ips and apiServerServingNames:
// apiserver.crt/key (signed by a new CA, returned in PEM) and the service
// account signer sa-signer.crt/key.
func writeAPIServerCerts(dir string, ips []net.IP) (caPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the serving CA key: %w", err)
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "kube-apiserver-serving-ca"}, caKey)
	if err != nil {
		return nil, fmt.Errorf("making the serving CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("choosing a serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     apiServerServingNames,
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1), KubernetesServiceIP}, ips...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the serving key: %w", err)
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating the service account signing key: %w", err)
	}
	saCert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "service-account-signer"}, saKey)
	if err != nil {
		return nil, fmt.Errorf("making the service account signer: %w", err)
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	files := map[string][]byte{
		"apiserver.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"apiserver.key":  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		"sa-signer.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: saCert.Raw}),
		"sa-signer.key":  pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"serving-ca.crt": caPEM,
	}
	var errs []error
	for name, data := range files {
		errs = append(errs, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("writing the API server's certificates: %w", err)
	}
	return caPEM, nil
}
